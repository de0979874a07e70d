# SPDX-License-Identifier: GPL-2.0-only
import unittest

from inventory import Item, Inventory, OutOfStock


class ModelsTest(unittest.TestCase):
    def setUp(self):
        self.inv = Inventory()
        self.inv.add(Item("A1", "bolt", 25), 40)
        self.inv.add(Item("B2", "nut", 10), 3)

    def test_stock(self):
        self.assertEqual(self.inv.stock("A1"), 40)
        self.assertEqual(self.inv.stock("ZZ"), 0)

    def test_remove(self):
        self.inv.remove("A1", 15)
        self.assertEqual(self.inv.stock("A1"), 25)

    def test_out_of_stock(self):
        with self.assertRaises(OutOfStock):
            self.inv.remove("B2", 4)

    def test_bad_item(self):
        with self.assertRaises(ValueError):
            Item("a b", "x", 1)
        with self.assertRaises(ValueError):
            Item("C3", "x", -1)

    def test_value(self):
        self.assertEqual(self.inv.value_cents(), 40 * 25 + 3 * 10)


if __name__ == "__main__":
    unittest.main()

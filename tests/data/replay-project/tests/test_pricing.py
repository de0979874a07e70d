# SPDX-License-Identifier: GPL-2.0-only
import unittest

from inventory import Item, Inventory, unit_price, order_total


class PricingTest(unittest.TestCase):
    def setUp(self):
        self.bolt = Item("A1", "bolt", 200)
        self.inv = Inventory()
        self.inv.add(self.bolt, 500)

    def test_no_discount(self):
        self.assertEqual(unit_price(self.bolt, 9), 200)

    def test_tier_starts_at_minimum(self):
        self.assertEqual(unit_price(self.bolt, 10), 190)
        self.assertEqual(unit_price(self.bolt, 50), 180)
        self.assertEqual(unit_price(self.bolt, 100), 170)

    def test_order_total(self):
        self.assertEqual(order_total(self.inv, [("A1", 10), ("A1", 1)]), 1900 + 200)


if __name__ == "__main__":
    unittest.main()

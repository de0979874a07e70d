# SPDX-License-Identifier: GPL-2.0-only
import unittest

from inventory import Item, Inventory, stock_report


class ReportTest(unittest.TestCase):
    def test_report(self):
        inv = Inventory()
        inv.add(Item("A1", "bolt", 25), 40)
        inv.add(Item("B2", "nut", 10), 3)
        text = stock_report(inv)
        self.assertIn("B2", text)
        self.assertTrue(text.splitlines()[2].endswith(" LOW"))
        self.assertEqual(text.splitlines()[-1], "TOTAL 10.30")


if __name__ == "__main__":
    unittest.main()

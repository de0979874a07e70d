# SPDX-License-Identifier: GPL-2.0-only
"""inventory: items, stock levels, pricing and reports."""
from .models import Item, Inventory, OutOfStock
from .pricing import unit_price, order_total, DISCOUNT_TIERS
from .report import stock_report

__all__ = ["Item", "Inventory", "OutOfStock", "unit_price", "order_total",
           "DISCOUNT_TIERS", "stock_report"]

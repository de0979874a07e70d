# SPDX-License-Identifier: GPL-2.0-only
"""Unit prices with bulk discounts, and order totals."""

# (minimum quantity, discount in percent), highest tier first.
DISCOUNT_TIERS = ((100, 15), (50, 10), (10, 5))


def discount_percent(quantity):
    for min_qty, percent in DISCOUNT_TIERS:
        if quantity > min_qty:
            return percent
    return 0


def unit_price(item, quantity):
    """Price of one unit in cents when buying `quantity` units."""
    percent = discount_percent(quantity)
    return item.price_cents * (100 - percent) / 100


def order_total(inventory, lines):
    """Total in cents of an order given as [(sku, quantity), ...]."""
    total = 0
    for sku, quantity in lines:
        item = inventory.item(sku)
        total += unit_price(item, quantity) * quantity
    return total

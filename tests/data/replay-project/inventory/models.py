# SPDX-License-Identifier: GPL-2.0-only
"""Items and the inventory that holds their stock levels."""
from dataclasses import dataclass


class OutOfStock(Exception):
    """Raised when an order asks for more than the inventory holds."""


@dataclass(frozen=True)
class Item:
    sku: str
    name: str
    price_cents: int

    def __post_init__(self):
        if not self.sku or not self.sku.isalnum():
            raise ValueError(f"bad sku {self.sku!r}")
        if self.price_cents < 0:
            raise ValueError("price must not be negative")


class Inventory:
    """Stock levels by SKU."""

    def __init__(self):
        self._items = {}
        self._stock = {}

    def add(self, item, quantity=0):
        if quantity < 0:
            raise ValueError("quantity must not be negative")
        self._items[item.sku] = item
        self._stock[item.sku] = self._stock.get(item.sku, 0) + quantity

    def item(self, sku):
        return self._items[sku]

    def stock(self, sku):
        return self._stock.get(sku, 0)

    def remove(self, sku, quantity):
        have = self.stock(sku)
        if quantity > have:
            raise OutOfStock(f"{sku}: want {quantity}, have {have}")
        self._stock[sku] = have - quantity

    def skus(self):
        return sorted(self._items)

    def value_cents(self):
        return sum(self._items[s].price_cents * self._stock[s] for s in self._items)

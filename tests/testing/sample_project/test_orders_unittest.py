from django_xsm.registry import machines
from django_xsm.testing import XsmTestCase


class OrderTests(XsmTestCase):
    def test_an_unpaid_order_is_cancelled_after_an_hour(self):
        orders = machines["order"].objects
        orders.send("order:1", "ADD_ITEM", create=True, sku="tea", qty=1, price_cents=450)
        orders.send("order:1", "CHECKOUT")
        self.assertEqual(self.xsm.advance(3600), 1)
        self.assertEqual(orders.get("order:1").value, "cancelled")

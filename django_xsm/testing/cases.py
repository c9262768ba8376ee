"""``XsmTestCase``: the ``xsm`` helper for ``unittest`` / ``manage.py test``.

::

    from django_xsm.testing import XsmTestCase

    class OrderTests(XsmTestCase):
        def test_an_unpaid_order_is_cancelled_after_an_hour(self):
            ...
            self.assertEqual(self.xsm.advance(3600), 1)
"""

from __future__ import annotations

from django.test import TestCase

from .helper import Xsm

__all__ = ["XsmTestCase"]


class XsmTestCase(TestCase):
    """A ``django.test.TestCase`` whose tests each get ``self.xsm``
    (:class:`~.helper.Xsm`): a namespace of their own, a clock that moves
    only with ``self.xsm.advance()``, the outbox (``emitted``,
    ``deliver()``) and on-commit callbacks run as in production. It starts
    in :meth:`setUp` (call ``super().setUp()`` when you override it) and
    stops before the test's transaction is rolled back. Instances made in
    ``setUpTestData`` would live outside the test's namespace: make them in
    ``setUp`` or in the test."""

    xsm: Xsm

    def setUp(self) -> None:
        super().setUp()
        self.xsm = Xsm().start()
        self.addCleanup(self.xsm.stop)

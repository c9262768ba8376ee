"""``XsmTestCase``: the helper as ``self.xsm`` in a ``django.test.TestCase``
(what ``manage.py test`` runs): a namespace per test, the clock, and
on-commit callbacks inside the case's transaction."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.test import override_settings

from django_xsm import backend as stores
from django_xsm.registry import machines
from django_xsm.signals import post_transition
from django_xsm.testing import XsmTestCase
from tests.django.settings import XSM as BASE
from tests.testing.machines import MACHINES


@override_settings(XSM={**BASE, "MACHINES": {**BASE["MACHINES"], **MACHINES}})
class TicketTests(XsmTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.received: list[str] = []

        def receiver(sender: Any, *, key: str, **kwargs: Any) -> None:
            self.received.append(key)

        post_transition.connect(receiver, dispatch_uid="xsm-test-case", weak=False)
        self.addCleanup(post_transition.disconnect, dispatch_uid="xsm-test-case")

    def test_the_timer_fires_on_advance(self) -> None:
        objects = machines["ticket"].objects
        objects.send("t:1", "BUMP", create=True)
        self.assertEqual(self.xsm.advance(59), 0)
        self.assertEqual(self.xsm.advance(1), 1)
        self.assertEqual(objects.get("t:1").value, "stale")
        self.assertTrue(stores.clock_is_set())
        self.assertEqual(settings.XSM["PREFIX"], self.xsm.prefix)

    def test_post_transition_receivers_run_inside_the_cases_transaction(self) -> None:
        machines["ticket"].objects.send("t:1", "BUMP", create=True)
        self.assertEqual(self.received, ["t:1"])

    def test_a_key_used_by_another_test_is_fresh_here(self) -> None:
        # test_the_timer_fires_on_advance used t:1 too
        self.assertFalse(machines["ticket"].objects.exists("t:1"))
        machines["ticket"].objects.send("t:1", "BUMP", create=True)
        self.assertEqual(machines["ticket"].objects.get("t:1").version, 1)


class AfterTheCase(XsmTestCase):
    def test_the_helper_stops_with_its_test(self) -> None:
        helper = self.xsm
        self.doCleanups()  # what unittest does after tearDown
        self.assertFalse(stores.clock_is_set())
        self.assertEqual(settings.XSM["PREFIX"], BASE["PREFIX"])
        self.assertIn("not running", repr(helper))

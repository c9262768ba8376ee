"""What docs/django.md ("Signals") tells test writers: in a Django
``TestCase`` the transaction never commits, so ``post_transition``
receivers run only under ``captureOnCommitCallbacks(execute=True)`` (with
pytest-django: ``django_capture_on_commit_callbacks``)."""

from __future__ import annotations

import uuid
from typing import Any

from django.test import TestCase

from django_xsm.registry import machines
from django_xsm.signals import post_transition


def bump() -> str:
    key = f"ticket:{uuid.uuid4().hex[:12]}"
    with machines["ticket"].objects.open(key, actor="test") as block:
        block.send("BUMP")
    return key


class PostTransitionInATestCase(TestCase):
    def setUp(self) -> None:
        self.received: list[str] = []

        def receiver(sender: Any, *, key: str, **kwargs: Any) -> None:
            self.received.append(key)

        post_transition.connect(receiver, dispatch_uid="testcase-receiver", weak=False)
        self.addCleanup(post_transition.disconnect, dispatch_uid="testcase-receiver")

    def test_receivers_wait_for_a_commit_that_never_comes(self) -> None:
        bump()
        self.assertEqual(self.received, [])

    def test_capture_on_commit_callbacks_runs_them(self) -> None:
        with self.captureOnCommitCallbacks(execute=True) as callbacks:
            key = bump()
        self.assertEqual(len(callbacks), 1)
        self.assertEqual(self.received, [key])


def test_the_pytest_django_fixture_runs_them(
    db: Any, django_capture_on_commit_callbacks: Any
) -> None:
    received: list[str] = []

    def receiver(sender: Any, *, key: str, **kwargs: Any) -> None:
        received.append(key)

    post_transition.connect(receiver, dispatch_uid="fixture-receiver", weak=False)
    try:
        key = bump()
        assert received == []  # the test's transaction has not committed
        with django_capture_on_commit_callbacks(execute=True):
            key = bump()
        assert received == [key]
    finally:
        post_transition.disconnect(dispatch_uid="fixture-receiver")

"""django-fsm-2: the order is a row with an ``FSMField``; PAY is a
``@transition`` (a self-transition on ``awaiting_payment`` that counts
the payment, as in ``chart.json``), logged by django-fsm-log (its default
``SimpleBackend``: one ``StateLog`` row per transition, written by the
``post_transition`` signal, so inside the caller's transaction)."""

from __future__ import annotations

from django.db import models
from django_fsm import FSMField, transition
from django_fsm_log.decorators import fsm_log_by, fsm_log_description


class Order(models.Model):
    id = models.IntegerField(primary_key=True)
    state = FSMField(default="cart", protected=False)
    payments = models.IntegerField(default=0)
    paid_cents = models.BigIntegerField(default=0)

    @fsm_log_by
    @fsm_log_description
    @transition(field=state, source="cart", target="awaiting_payment")
    def checkout(self, by: object = None, description: str | None = None) -> None:
        pass

    @fsm_log_by
    @fsm_log_description
    @transition(field=state, source="awaiting_payment", target="awaiting_payment")
    def pay(self, amount_cents: int, by: object = None, description: str | None = None) -> None:
        self.payments += 1
        self.paid_cents += amount_cents

    @fsm_log_by
    @fsm_log_description
    @transition(field=state, source="awaiting_payment", target="paid")
    def settle(self, by: object = None, description: str | None = None) -> None:
        pass


class IdempotencyKey(models.Model):
    """Key -> stored response, unique per (scope, order, key); written in
    the transaction that applies the transition."""

    scope = models.CharField(max_length=100)
    order = models.ForeignKey(Order, on_delete=models.CASCADE)
    key = models.CharField(max_length=255)
    fingerprint = models.CharField(max_length=64)
    status = models.PositiveSmallIntegerField()
    content_type = models.CharField(max_length=100)
    body = models.BinaryField()
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["scope", "order", "key"], name="idem_unique")
        ]

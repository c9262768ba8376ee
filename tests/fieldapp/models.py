"""Models of the model-field tests: integer, UUID and string primary keys,
another key template, ``on_delete="keep"``, and two statecharts on one row."""

from __future__ import annotations

import uuid

from django.db import models

from django_xsm.fields import StatechartField


class Order(models.Model):
    total = models.PositiveIntegerField(default=0)
    status = StatechartField(machine="shop")

    class Meta:
        permissions = [("refund_order", "Can refund an order")]

    def __str__(self) -> str:
        return f"Order {self.pk}"


class UuidOrder(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4)
    status = StatechartField(machine="shop", key="uuid-order:{pk}")


class SlugOrder(models.Model):
    slug = models.SlugField(primary_key=True)
    status = StatechartField(machine="shop", key="slug-order:{slug}", on_delete="keep")


class Parcel(models.Model):
    state = StatechartField(machine="parcel")


class Shipment(models.Model):
    """Two statecharts on one row (the admin mixin shows a panel each)."""

    payment = StatechartField(machine="shop", key="shipment-payment:{pk}")
    delivery = StatechartField(machine="parcel", key="shipment:{pk}")

    def __str__(self) -> str:
        return f"Shipment {self.pk}"


class VipOrder(models.Model):
    """Shares the machine with Order under a longer template ("shop:vip:1"
    must move this row, never Order's)."""

    tier = StatechartField(machine="shop", key="shop:vip:{pk}")


class TinyParcel(models.Model):
    """A column too short for the parcel's parallel state (check xsm.W101)."""

    state = StatechartField(machine="parcel", max_length=12)


class Ticket(models.Model):
    """A help-desk ticket (UUID key): its initial state arms a timer and
    emits an event, so its instance must exist once the row is saved."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4)
    title = models.CharField(max_length=100, blank=True)
    status = StatechartField(machine="desk", key="desk:{pk}")

    def __str__(self) -> str:
        return f"Ticket {self.pk}"


class Signup(models.Model):
    """A chart whose initial state has an entry action (reads must not run it)."""

    step = StatechartField(machine="signup")

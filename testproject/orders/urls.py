from __future__ import annotations

from django.urls import path

from . import views

app_name = "orders"

# <slug:...> keeps order ids to [-a-zA-Z0-9_], so a URL can never smuggle
# control characters into an instance key.
urlpatterns = [
    path("", views.index, name="index"),
    path("orders/<slug:order_id>/", views.detail, name="detail"),
    path(
        "orders/<slug:order_id>/simulate-payment", views.simulate_payment, name="simulate-payment"
    ),
    path("api/orders", views.create_order, name="api-create"),
    path("api/orders/<slug:order_id>", views.get_order, name="api-order"),
    path("api/orders/<slug:order_id>/items", views.add_item, name="api-items"),
    path("api/orders/<slug:order_id>/checkout", views.checkout, name="api-checkout"),
    path("api/orders/<slug:order_id>/cancel", views.cancel, name="api-cancel"),
    path("api/orders/<slug:order_id>/ship", views.ship, name="api-ship"),
    path(
        "api/orders/<slug:order_id>/switch-warehouse",
        views.switch_warehouse,
        name="api-switch-warehouse",
    ),
    path("webhooks/payments", views.payment_webhook, name="payment-webhook"),
]

from __future__ import annotations

from django.urls import include, path
from rest_framework.routers import DefaultRouter

from . import views

router = DefaultRouter()
router.register("orders", views.OrderViewSet, basename="order")
router.register("optional-orders", views.OptionalKeyOrderViewSet, basename="optional-order")
router.register("no-retry-orders", views.NoRetryOrderViewSet, basename="no-retry-order")
router.register("locked-orders", views.LockedOrderViewSet, basename="locked-order")
router.register("members-orders", views.MembersOrderViewSet, basename="members-order")
router.register("staff-orders", views.StaffOrderViewSet, basename="staff-order")
router.register("slug-orders", views.SlugOrderViewSet, basename="slug-order")
router.register("parcels", views.ParcelViewSet, basename="parcel")
router.register("deliveries", views.DeliveryViewSet, basename="delivery")
router.register("tickets", views.TicketViewSet, basename="ticket")

urlpatterns = [
    path("", include("tests.django.urls")),
    path("api/", include(router.urls)),
]

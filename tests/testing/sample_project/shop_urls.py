from django.urls import include, path

urlpatterns = [path("", include("testproject.orders.urls"))]

from tests.django.admin.conftest import ADMIN, seed_ticket
def test_smoke(backend, client_for):
    seed_ticket("t:1", note="<script>window.__x=1</script>")
    c = client_for("root", superuser=True)
    for url in [ADMIN, ADMIN+"m/ticket/", ADMIN+"m/ticket/instance/?key=t:1", ADMIN+"m/ticket/send/?key=t:1", ADMIN+"m/ticket/forget/?key=t:1", "/admin/"]:
        r = c.get(url)
        print(url, r.status_code)
        assert r.status_code == 200, r.content.decode()[:3000]
    open("/tmp/detail.html","w").write(c.get(ADMIN+"m/ticket/instance/?key=t:1").content.decode())
    open("/tmp/index.html","w").write(c.get("/admin/").content.decode())

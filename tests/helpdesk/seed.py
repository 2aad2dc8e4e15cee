"""The helpdesk's data: two teams, their tickets, and the four users the e2e tests act as.

Keys are fixed, so tests name rows without looking them up. Only the constants are imported
by the test process; ``seed()`` runs inside the project (``manage.py shell``).
"""

import uuid

ALPHA, BETA = uuid.UUID(int=0xA1), uuid.UUID(int=0xB1)
ACME, GLOBEX = uuid.UUID(int=0xC1), uuid.UUID(int=0xC2)
#: Alpha's tickets; BROKEN_CHAIR is the one admin actions change.
PRINTER_ON_FIRE, SLOW_VPN, PASSWORD_RESET, BROKEN_CHAIR = (
    uuid.UUID(int=0x1000 + n) for n in range(4)
)
#: Beta's tickets, which Alpha's agents never see.
INVOICE_MISSING, REFUND_DONE = uuid.UUID(int=0x2000), uuid.UUID(int=0x2001)

ALPHA_SUBJECTS = {"Printer on fire", "Slow VPN", "Password reset", "Broken chair"}
BETA_SUBJECTS = {"Invoice missing", "Refund done"}

#: Staff of team Alpha with most permissions (no delete).
AGENT = "agent"
#: Staff of team Beta who may only view.
VIEWER = "viewer"
#: Staff without a single permission.
NOBODY = "nobody"
#: Not staff (so never in the admin), holding one view permission.
REP = "rep"
USERNAMES = (AGENT, VIEWER, NOBODY, REP)


def seed() -> None:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission
    from django.contrib.contenttypes.models import ContentType

    from .desk.models import Comment, Customer, Note, Tag, Team, Ticket

    alpha = Team.objects.create(id=ALPHA, name="Alpha")
    beta = Team.objects.create(id=BETA, name="Beta")
    acme = Customer.objects.create(id=ACME, name="Acme", email="help@acme.example")
    globex = Customer.objects.create(id=GLOBEX, name="Globex", email="it@globex.example")
    hardware = Tag.objects.create(name="hardware")
    rows = [
        (
            PRINTER_ON_FIRE,
            "Printer on fire",
            acme,
            alpha,
            "open",
            "urgent",
            {"floor": 3, "model": "LJ-4"},
        ),
        (SLOW_VPN, "Slow VPN", acme, alpha, "open", "normal", {}),
        (PASSWORD_RESET, "Password reset", globex, alpha, "pending", "low", {}),
        (BROKEN_CHAIR, "Broken chair", globex, alpha, "open", "low", {}),
        (INVOICE_MISSING, "Invoice missing", globex, beta, "open", "normal", {"invoice": "INV-7"}),
        (REFUND_DONE, "Refund done", acme, beta, "resolved", "normal", {}),
    ]
    for pk, subject, customer, team, status, priority, metadata in rows:
        Ticket.objects.create(
            id=pk,
            subject=subject,
            customer=customer,
            team=team,
            status=status,
            priority=priority,
            metadata=metadata,
        )
    Ticket.objects.get(pk=PRINTER_ON_FIRE).tags.add(hardware)

    User = get_user_model()

    def perms(*codenames: str) -> list[Permission]:
        return list(
            Permission.objects.filter(content_type__app_label="desk", codename__in=codenames)
        )

    agent = User.objects.create_user(AGENT, is_staff=True, team=alpha)
    agent.user_permissions.set(
        perms(
            *(
                f"{a}_{m}"
                for a in ("view", "add", "change")
                for m in ("ticket", "customer", "comment", "note", "tag")
            ),
            "view_team",
        )
    )
    viewer = User.objects.create_user(VIEWER, is_staff=True, team=beta)
    viewer.user_permissions.set(perms("view_ticket", "view_customer", "view_comment"))
    User.objects.create_user(NOBODY, is_staff=True)
    rep = User.objects.create_user(REP, is_staff=False, team=alpha)
    rep.user_permissions.set(perms("view_customer"))

    Comment.objects.create(ticket_id=PRINTER_ON_FIRE, author=agent, body="Extinguisher on its way.")
    Comment.objects.create(ticket_id=INVOICE_MISSING, author=viewer, body="Asked accounting.")
    Note.objects.create(
        content_type=ContentType.objects.get_for_model(Customer),
        object_id=str(ACME),
        text="Key account",
    )

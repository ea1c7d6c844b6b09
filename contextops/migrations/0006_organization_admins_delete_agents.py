"""Organization admins made before they could delete agents get that right too.

An organization's admin is a staff user, not a superuser, who holds ``add_agent``
(contextops.tenancy.ORGANIZATION_ADMIN_PERMISSIONS); each now also holds ``delete_agent``,
as those ``create_user --admin`` makes from now on. On a new database the permission does
not exist yet (Django creates permissions after migrating) and neither does any user."""

from django.db import migrations


def grant(apps, schema_editor):
    Permission = apps.get_model("auth", "Permission")
    User = apps.get_model("auth", "User")
    delete = Permission.objects.filter(
        content_type__app_label="contextops", codename="delete_agent"
    ).first()
    if delete is None:
        return
    admins = User.objects.filter(
        is_staff=True,
        is_superuser=False,
        user_permissions__content_type__app_label="contextops",
        user_permissions__codename="add_agent",
    ).distinct()
    for user in admins:
        user.user_permissions.add(delete)


class Migration(migrations.Migration):
    dependencies = [
        ("contextops", "0005_audit_entry"),
        ("auth", "0012_alter_user_first_name_max_length"),
    ]

    operations = [migrations.RunPython(grant, migrations.RunPython.noop)]

"""The few facts governing a subject (current constraints and policy), indexed by subject: a
context pack reads those of its facts' subjects without visiting every current fact of each."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('contextops', '0005_audit_entry'),
        ('facts', '0006_fact_ranking_by_word_share_postgresql'),
    ]

    operations = [
        migrations.AddIndex(
            model_name='fact',
            index=models.Index(condition=models.Q(('is_valid', True), models.Q(('is_constraint', True), ('memory_type', 'organizational'), _connector='OR')), fields=['organization', 'subject'], name='fact_governing_subject'),
        ),
    ]

"""A run's artifacts: the typed records each check leaves (records), how the tiers write them and
the code objects beside them (writer), and every form they are shown in (render: JSON, the
terminal summary, the step summary's markdown)."""

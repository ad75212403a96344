"""inv doctor: a catalogue of known failures (compat/doctor.yml) and their detection on a target."""

"""Knowledge from earlier campaigns: problem signatures and hardware classes (``signature``),
warm-start priors from records of similar problems (``warm``), and calibration of the agents'
predictions (``calibration``)."""

"""bertprobe-textattack: TextAttack's attack recipes (Morris et al. 2020) as the bertprobe probe ``textattack``."""

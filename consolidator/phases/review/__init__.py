"""Review: an admin's decisions on pending memory versions (`versions`) and on proposed
skills (`skills`)."""

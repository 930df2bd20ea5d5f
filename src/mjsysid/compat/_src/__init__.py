"""``mujoco.sysid._src`` under :mod:`mjsysid.compat`: one real module per module of the peer
(``io``, ``model_modifier``, ``optimize``, ``parameter``, ``plotting``, ``residual``,
``signal_modifier``, ``signal_transform``, ``timeseries``, ``trajectory``), each holding the
names the peer's module holds."""

"""Guardrails for the platform stack.

``rules`` lists the rules in order (``RULES``); ``rule_types`` says what a rule and a check are;
the checks are plain functions over a resource's type token and properties (no Pulumi import), one
module per domain in ``checks`` (``storage``, ``iam``, ``credentials``, ``network``, ``egress``,
``vms``, ``cost``) over the readers of ``iam``, ``firewall``, ``instances``,
``labels`` and ``values``. ``evaluate`` runs them offline (tests, ``vtx review``) and ``policies``
wraps the same functions as CrossGuard policies for ``pulumi preview --policy-pack infra/policy``.
"""

"""Guardrails for the platform stack.

``rules`` holds the rules as plain functions over a resource's type token and properties (no
Pulumi import), ``evaluate`` runs them offline (tests, ``vtx review``) and ``policies`` wraps the
same functions as CrossGuard policies for ``pulumi preview --policy-pack infra/policy``.
"""

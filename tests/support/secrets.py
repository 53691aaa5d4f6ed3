"""Credential-shaped test values, built at import from a seeded generator (none is pasted).

`SECRET_FORMS` maps a form's name to (the text as it appears, the secret part that must not
survive redaction): provider key shapes, a PEM private key, and random values assigned to
secret-ish words.
"""

from __future__ import annotations

import base64
import json
import random
import string

_RANDOM = random.Random(8)
_ALNUM = string.ascii_letters + string.digits
_UPPER_DIGITS = string.ascii_uppercase + string.digits


def random_chars(n: int, alphabet: str = _ALNUM) -> str:
    """`n` characters drawn from `alphabet` by the module's seeded generator."""
    return "".join(_RANDOM.choice(alphabet) for _ in range(n))


def _b64url(data: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


def _bare(value: str) -> tuple[str, str]:
    return value, value


def _assigned(prefix: str, value: str, suffix: str = "") -> tuple[str, str]:
    return prefix + value + suffix, value


def secret_forms() -> dict[str, tuple[str, str]]:
    """A fresh set of every form: name → (text as it appears, secret that must not survive)."""
    pem_lines = [random_chars(64, _ALNUM + "+/") for _ in range(3)]
    return {
        "openai_sk": _bare("sk-" + random_chars(48)),
        "openai_project": _bare("sk-proj-" + random_chars(40) + "_" + random_chars(20)),
        "anthropic": _bare("sk-ant-api03-" + random_chars(40)),
        "aws_access_key_id": _bare("AKIA" + random_chars(16, _UPPER_DIGITS)),
        "aws_session_key_id": _bare("ASIA" + random_chars(16, _UPPER_DIGITS)),
        "github_classic": _bare("ghp_" + random_chars(36)),
        "github_oauth": _bare("gho_" + random_chars(36)),
        "github_fine_grained": _bare("github_pat_" + random_chars(22) + "_" + random_chars(59)),
        "gitlab": _bare("glpat-" + random_chars(20)),
        "jwt": _bare(
            _b64url({"alg": "HS256", "typ": "JWT"}) + "." + _b64url({"sub": "42"}) + "."
            + random_chars(43)
        ),
        "slack_bot": _bare(f"xoxb-{random_chars(12, string.digits)}-{random_chars(24)}"),
        "slack_user": _bare(f"xoxp-{random_chars(12, string.digits)}-{random_chars(24)}"),
        "stripe_secret": _bare("sk_live_" + random_chars(24)),
        "stripe_restricted": _bare("rk_live_" + random_chars(24)),
        "google_api_key": _bare("AIza" + random_chars(35)),
        # Found surviving an export by an outside check (npm in a 200 body); and their kin.
        "npm_token": _bare("npm_" + random_chars(36)),
        "hugging_face": _bare("hf_" + random_chars(34)),
        "pypi_token": _bare("pypi-AgEIcHlwaS5vcmc" + random_chars(60, _ALNUM + "_-")),
        "pem_private_key": (
            "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(pem_lines)
            + "\n-----END RSA PRIVATE KEY-----",
            pem_lines[1],
        ),
        "token_assignment": _assigned("token=", random_chars(40, "0123456789abcdef")),
        "aws_secret_assignment": _assigned("aws_secret_access_key=", random_chars(40) + "/+x"),
        "session_colon": _assigned("session: ", random_chars(32)),
        "quoted_secret_word": _assigned("client-sig='", random_chars(24), "'"),
        # Found surviving an export by an outside check (2026-12-04): a credential after an
        # authorization scheme other than Bearer/Basic, cookies written out, a `pwd` key,
        # webhook URLs and signed URLs.
        "authorization_token": _assigned("Authorization: Token ",
                                         random_chars(40, "0123456789abcdef")),
        "authorization_apikey": _assigned(
            "Authorization: ApiKey ", base64.b64encode(random_chars(20).encode()).decode()),
        "x_authorization_scheme": _assigned("X-Authorization: Custom ", random_chars(12)),
        "cookie_header": _assigned("Cookie: sid=", random_chars(24), "; theme=dark"),
        "set_cookie_header": _assigned("Set-Cookie: session=s%3A", random_chars(20),
                                       "; Path=/; HttpOnly"),
        "pwd_json_key": _assigned('{"pwd": "', random_chars(10), '"}'),
        "slack_webhook": _assigned("https://hooks.slack.com/services/T024BE7LD/B08K3N0F9/",
                                   random_chars(24)),
        "discord_webhook": _assigned("https://discord.com/api/webhooks/123456789012/",
                                     random_chars(60, _ALNUM + "_-")),
        "s3_presigned_url": _assigned(
            "https://bucket.s3.amazonaws.com/key?X-Amz-Algorithm=AWS4-HMAC-SHA256&"
            "X-Amz-Signature=", random_chars(64, "0123456789abcdef")),
        "azure_sas_url": _assigned("https://acct.blob.core.windows.net/c/b?sv=2022-11-02&sig=",
                                   random_chars(43), "&se=2030-01-01"),
    }  # fmt: skip


SECRET_FORMS = secret_forms()

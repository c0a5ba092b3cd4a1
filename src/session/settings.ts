import { z } from "zod";
import { defineSettings, setting } from "../settings/define.js";
import { window, WINDOW_RULE } from "../settings/rules.js";

const n = () => z.coerce.number().int();

/** Sessions' token lifetimes and abuse limits (docs/settings.md#session-abuse-limits). */
export const sessionSettings = defineSettings({
  SESSION_TOKEN_TTL_SECONDS: setting({
    schema: n().min(30).max(86_400).default(900),
    section: "tokens",
    text: "Lifetime of user access tokens.",
  }),
  REFRESH_TOKEN_TTL_SECONDS: setting({
    schema: n()
      .min(60)
      .max(365 * 86_400)
      .default(30 * 86_400),
    section: "tokens",
    text: "Lifetime of refresh tokens (the default is 30 days, the most 365 days).",
  }),
  // docs/session-api.md#refresh: a client that lost a refresh's answer may ask again.
  REFRESH_REUSE_GRACE_SECONDS: setting({
    schema: n().min(0).max(300).default(30),
    section: "tokens",
    rule: "a whole number from 0 to 300",
    text:
      "How long after its first use a refresh token presented again answers that use's tokens again, " +
      "while their refresh token is unused (later, or after it was used, a reuse revokes the session; " +
      "`0`: every reuse does).",
  }),
  CHANGE_PASSWORD_GRANT_SECONDS: setting({
    schema: n().min(1).max(86_400).default(300),
    section: "tokens",
    text: "How long `svc:pwd:write` lasts after a login with `grant_change_password`.",
  }),
  LOGIN_LIMIT_APP: setting({
    schema: window.default({ limit: 1_000, windowSeconds: 3_600 }),
    section: "session",
    rule: WINDOW_RULE,
    text:
      "Login codes sent for one app to identifiers no user of the app holds yet; codes to the app's users " +
      "are neither counted nor refused.",
  }),
  LOGIN_LIMIT_IP: setting({
    schema: window.default({ limit: 10, windowSeconds: 3_600 }),
    section: "session",
    rule: WINDOW_RULE,
    text: "Login codes asked from one client address, per app.",
  }),
  APP_SMS_DAILY_LIMIT: setting({
    schema: window.default({ limit: 10_000, windowSeconds: 86_400 }),
    section: "session",
    rule: WINDOW_RULE,
    text:
      "Login SMS of one app to numbers no user of the app holds yet; codes to the app's users (step-up " +
      "codes among them) are neither counted nor refused.",
  }),
  OTP_CHECK_LIMIT: setting({
    schema: window.default({ limit: 10, windowSeconds: 900 }),
    section: "session",
    rule: WINDOW_RULE,
    text:
      "Code checks per user across its step-up challenges (per identifier for logins; a known source of it " +
      "has a window of its own).",
  }),
  // Failed password logins per app and identifier, and per client address (docs/session-api.md#password-login).
  PASSWORD_FAILURES_IDENTIFIER: setting({
    schema: window.default({ limit: 10, windowSeconds: 900 }),
    section: "session",
    rule: WINDOW_RULE,
    text:
      "Failed password logins (`POST /v1/session/login/password`) per app and identifier; while the window " +
      "is full every password login of that identifier, right or wrong, gets 429 `too_many_attempts` with `Retry-After`, " +
      "except from a known source (a network that logged in as the identifier within 30 days), which meets a window of its own.",
  }),
  PASSWORD_FAILURES_IP: setting({
    schema: window.default({ limit: 30, windowSeconds: 300 }),
    section: "session",
    rule: WINDOW_RULE,
    text:
      "Failed password logins per client address, across apps; while the window is full every password " +
      "login from that address, right or wrong, gets 429 `too_many_attempts` with `Retry-After`.",
  }),
});

/** Sessions' settings, parsed. */
export type SessionSettings = ReturnType<(typeof sessionSettings)["finish"]>;

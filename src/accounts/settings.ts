import { defineSettings, setting } from "../settings/define.js";
import { window, WINDOW_RULE } from "../settings/rules.js";

/** Accounts' abuse limit (docs/settings.md#session-abuse-limits). */
export const accountsSettings = defineSettings({
  // Wrong account API keys (V1 x-api-key, V2 bearer) from one client address.
  API_KEY_FAILURES_IP: setting({
    schema: window.default({ limit: 30, windowSeconds: 300 }),
    section: "session",
    rule: WINDOW_RULE,
    text:
      "Wrong account API keys (V1 `x-api-key`, V2 bearer) per client address; while the window is full " +
      "its wrong keys get 429 (V1: 400 `bad_request`) with `Retry-After`, and a right key is still served.",
  }),
});

/** Accounts' settings, parsed. */
export type AccountsSettings = ReturnType<(typeof accountsSettings)["finish"]>;

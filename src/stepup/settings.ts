import { z } from "zod";
import { defineSettings, setting } from "../settings/define.js";
import { window, WINDOW_RULE } from "../settings/rules.js";

/** Step-up's token lifetime and abuse limits (docs/settings.md#session-abuse-limits). */
export const stepUpSettings = defineSettings({
  STEP_UP_TOKEN_TTL_SECONDS: setting({
    schema: z.coerce.number().int().min(10).max(3_600).default(300),
    section: "tokens",
    text: "Lifetime of a step-up token.",
  }),
  STEPUP_LIMIT_USER: setting({
    schema: window.default({ limit: 10, windowSeconds: 3_600 }),
    section: "session",
    rule: WINDOW_RULE,
    text: "Step-up challenges opened (codes sent) and delegation hooks called, per user.",
  }),
  STEPUP_LIMIT_SESSION: setting({
    schema: window.default({ limit: 5, windowSeconds: 900 }),
    section: "session",
    rule: WINDOW_RULE,
    text: "Step-up challenges and hook calls per session.",
  }),
});

/** Step-up's settings, parsed. */
export type StepUpSettings = ReturnType<(typeof stepUpSettings)["finish"]>;

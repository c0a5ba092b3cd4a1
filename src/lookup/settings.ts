import { z } from "zod";
import { LINE_TYPES } from "../phone/line-types.js";
import { defineSettings, setting } from "../settings/define.js";
import { csv } from "../settings/rules.js";

/** What a number's own facts make spam (docs/settings.md#send-windows-and-spam). */
export const lookupSettings = defineSettings({
  SPAM_LINE_TYPES: setting({
    schema: csv(LINE_TYPES).default(["PremiumRate", "SharedCost"]),
    section: "sends",
    rule: `a comma list of line types (${LINE_TYPES.map((t) => `\`${t}\``).join(", ")})`,
    text: "Line types that are `spam_detected` outright.",
  }),
  SPAM_DISPOSABLE: setting({
    schema: z
      .enum(["true", "false"])
      .transform((v) => v === "true")
      .default(true),
    section: "sends",
    text: "Disposable numbers are `spam_detected`.",
  }),
});

/** The spam rules of a number's own facts, parsed. */
export type LookupSettings = ReturnType<(typeof lookupSettings)["finish"]>;

import { z } from "zod";
import { defineSettings, setting } from "../settings/define.js";

/** V1 after its sunset (docs/settings.md#v1). */
export const v1Settings = defineSettings({
  V1_AFTER_SUNSET: setting({
    schema: z.enum(["serve", "gone"]).default("serve"),
    section: "v1",
    text: "`serve` keeps V1; `gone` answers every V1 call 410 `gone`.",
  }),
});

/** V1's settings, parsed. */
export type V1Settings = ReturnType<(typeof v1Settings)["finish"]>;

import { z } from "zod";
import { parseHttpUrl } from "../net/http-url.js";
import { parseCidrs } from "../net/cidr.js";

/** The value rules several settings share: ports, URLs, windows, lists (docs/settings.md). */

export const port = z.coerce.number().int().min(0).max(65535);

/** A setting holding a URL of one of `protocols` (redis:, smtp:, smpp:). */
export const url = (protocols: readonly string[]) =>
  z
    .string()
    .refine(
      (v) => URL.canParse(v) && protocols.includes(new URL(v).protocol),
      `must be a URL (${protocols.join(" or ")})`,
    );

/** A setting holding an http(s) URL. */
export const httpUrl = () =>
  z.string().refine((v) => parseHttpUrl(v) !== undefined, "must be a URL (http: or https:)");

/** `count/seconds`, e.g. `5/600` (at most 5 in 10 minutes); `off` disables the rule. */
export const window = z
  .string()
  .regex(/^(off|\d{1,7}\/\d{1,7})$/, "must be count/seconds such as 5/600, or off")
  .transform((v) => {
    if (v === "off") return null;
    const [count = "0", seconds = "0"] = v.split("/");
    return { limit: Number(count), windowSeconds: Number(seconds) };
  })
  .refine((v) => v === null || v.windowSeconds > 0, "the window must be at least 1 second");

/** How docs/settings.md words the rule of a window. */
export const WINDOW_RULE = "a window, `count/seconds` or `off`";

/** How docs/settings.md words a provider's timeout. */
export const MS = (what: string) => `Time ${what} has to answer, in milliseconds`;

/** A comma list of some of `allowed`. */
export const csv = (allowed: readonly string[]) =>
  z
    .string()
    .transform((v) =>
      v
        .split(",")
        .map((s) => s.trim())
        .filter((s) => s !== ""),
    )
    .refine((list) => list.every((s) => allowed.includes(s)), {
      message: `must be a comma list of: ${allowed.join(", ")}`,
    });

/** `10.0.0.0/8,::1/128`: a comma list of IPv4 or IPv6 CIDRs (empty: none). */
export const cidrs = z
  .string()
  .refine((v) => {
    try {
      parseCidrs(v);
      return true;
    } catch {
      return false;
    }
  }, "must be a comma list of CIDRs such as 10.0.0.0/8,::1/128")
  .transform(parseCidrs);

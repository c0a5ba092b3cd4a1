import { z } from "zod";
import { defineSettings, setting } from "../settings/define.js";
import { window, WINDOW_RULE } from "../settings/rules.js";

const n = () => z.coerce.number().int();

/** The fraud engine's settings (docs/fraud.md): windows and thresholds of its adaptive rules. */
export const fraudSettings = defineSettings({
  FRAUD_WINDOW_SECONDS: setting({
    schema: n().min(60).max(86_400).default(3_600),
    section: "fraud",
    text: "The recent window the adaptive rules count sends and conversions in (12 slices).",
  }),
  FRAUD_NEW_DESTINATION_SENDS: setting({
    schema: n().min(1).max(1_000_000).default(10),
    section: "fraud",
    text: "Sends a destination gets per window before its conversions and history must vouch for more.",
  }),
  FRAUD_NEW_DESTINATION_BUDGET: setting({
    schema: n().min(1).max(1_000_000).default(30),
    section: "fraud",
    text:
      "Unconverted sends a tenant may make per window, all together, to countries without a conversion " +
      "in the baseline days (rule `new_destination_budget`; a conversion there gives its send back), on " +
      "top of each destination's own FRAUD_NEW_DESTINATION_SENDS; blocked sends to destinations not yet " +
      "counted also add them to the tenant's counters and index only this many times per window " +
      "([fraud.md](fraud.md#how-it-decides)).",
  }),
  FRAUD_BASELINE_DAYS: setting({
    schema: n().min(1).max(60).default(14),
    section: "fraud",
    text: "Days of history a destination's baseline and the tenant's conversion are read from.",
  }),
  FRAUD_RETURNING_DAYS: setting({
    schema: n().min(1).max(3_650).default(90),
    section: "fraud",
    text:
      "Days a number that converted for a tenant stays a returning user: never refused by the destination " +
      "and budget rules (geo blocks and the hard windows still apply) ([fraud.md](fraud.md#returning-users)).",
  }),
  FRAUD_SOURCE_SENDS: setting({
    schema: n().min(1).max(1_000_000).default(20),
    section: "fraud",
    text:
      "Unconverted sends one source (an IPv4 address, its /24, an IPv6 /64, a device id) may make in a UTC " +
      "day before it is refused (rule `source_fanout`; a conversion gives its send back and earns " +
      "FRAUD_CONVERSION_CREDIT more) " +
      "([fraud.md](fraud.md#sources)).",
  }),
  FRAUD_SOURCE_COUNTRIES: setting({
    schema: n().min(1).max(300).default(3),
    section: "fraud",
    text: "Countries one source may send codes to in a UTC day; one more is refused (rule `source_fanout`).",
  }),
  FRAUD_SOURCE_SHARE: setting({
    schema: z.coerce.number().min(0.5).max(1).default(0.8),
    section: "fraud",
    text:
      "Share of a surging destination's sends in the window that at most two sources must have made for " +
      "those sources to be refused (rule `source_fanout`) instead of the destination, for everyone.",
  }),
  FRAUD_COUNTRY_SPREAD: setting({
    schema: n().min(1).max(1_000).default(3),
    section: "fraud",
    text:
      "Networks or prefixes of a country refused by the destination rules in the window before the " +
      "country itself may be: below it, a surge or drop in one range refuses that range only " +
      "([fraud.md](fraud.md#narrowest-destination)).",
  }),
  FRAUD_BASELINE_SHARE: setting({
    schema: z.coerce.number().min(0).max(10).default(0.1),
    section: "fraud",
    text: "Share of a destination's busiest day of conversions (over the baseline) it may get per window.",
  }),
  FRAUD_CONVERSION_CREDIT: setting({
    schema: z.coerce.number().min(0).max(100).default(2),
    section: "fraud",
    text: "Sends each distinct converting number in the window earns its destination.",
  }),
  FRAUD_GRACE_SECONDS: setting({
    schema: n().min(0).max(86_400).default(300),
    section: "fraud",
    text: "Age after which a send without its code entered counts as unconverted.",
  }),
  FRAUD_CONVERSION_MIN_SENDS: setting({
    schema: n().min(1).max(1_000_000).default(20),
    section: "fraud",
    text: "Sends past the grace a destination needs in the window before its conversion is judged.",
  }),
  FRAUD_CONVERSION_DROP: setting({
    schema: z.coerce.number().min(0).max(1).default(0.5),
    section: "fraud",
    text:
      "A destination converting below this share of its own best day before today (else the tenant's) " +
      "is blocked (rule `conversion_drop`).",
  }),
  FRAUD_PREFIX_DIGITS: setting({
    schema: n().min(2).max(12).default(6),
    section: "fraud",
    text: "Digits after the `+` that form a number's prefix destination.",
  }),
  FRAUD_DECISIONS_MAX: setting({
    schema: n().min(100).max(10_000_000).default(10_000),
    section: "fraud",
    text: "Decision records kept per tenant (besides the 30 days each is kept at most).",
  }),
  // Reads of the fraud reports per account (docs/fraud.md#pages).
  REPORTS_LIMIT_ACCOUNT: setting({
    schema: window.default({ limit: 60, windowSeconds: 60 }),
    section: "fraud",
    rule: WINDOW_RULE,
    text:
      "Reads of one account's fraud reports (`GET /v2/insights/verifications` and `GET /v2/fraud/decisions` " +
      "together, a page a read); past it 429 with `Retry-After` ([fraud.md](fraud.md#pages)).",
  }),
});

/** The fraud engine's settings, parsed. */
export type FraudConfig = ReturnType<(typeof fraudSettings)["finish"]>;
/** What the engine's rules are read from. */
export type FraudSettings = Omit<FraudConfig, "REPORTS_LIMIT_ACCOUNT">;

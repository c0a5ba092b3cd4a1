import { z } from "zod";

export const ACCOUNT_STATUSES = ["active", "suspended"] as const;
export type AccountStatus = (typeof ACCOUNT_STATUSES)[number];

export const ACCOUNT_FEATURES = ["cnam"] as const;

/**
 * The channels an account may send codes through (docs/v2-api.md#channels), in the order it falls
 * back: a V2 verification starts on the preferred one, else the first, then takes the others in
 * turn. `email` serves email targets only; V1 sends SMS whatever the account allows.
 */
export const ACCOUNT_CHANNELS = ["sms", "whatsapp", "voice", "email"] as const;
export type AccountChannel = (typeof ACCOUNT_CHANNELS)[number];
/** The channels of an account that never chose: SMS, as before channels existed. */
export const DEFAULT_CHANNELS: readonly AccountChannel[] = ["sms"];

/** The `secret_ref` kind of the webhook streams an account's secret signs (`account:<customer_uuid>`). */
export const ACCOUNT_SECRET_KIND = "account";
export type AccountFeature = (typeof ACCOUNT_FEATURES)[number];

/** A customer account of the V1 phone API. Money is kept in integer millionths of a currency unit. */
export interface Account {
  customerUuid: string;
  name: string;
  status: AccountStatus;
  balanceMicros: number;
  spendingLimitMicros: number;
  features: AccountFeature[];
  /** ISO 3166-1 alpha-2 codes the account may reach; empty means every region. */
  regions: string[];
  /** Sender IDs the account may put in `sender_id`; others fall back to SMS_FROM. */
  senderIds: string[];
  /** Message variants for `template_id`: template id → language → text with `{code}`. */
  templates: Record<string, Record<string, string>>;
  /** The channels V2 may send its codes through, in fallback order (at least one). */
  channels: AccountChannel[];
  createdAt: string;
}

/** What an account is stored with: its secrets only as a keyed hash or encrypted. */
export interface StoredAccount extends Account {
  apiKeyHash: string;
  webhookSecretSealed: string;
}

export const UUID = z.uuid();
export const SENDER_ID = z
  .string()
  .regex(/^([A-Za-z0-9 ]{1,11}|\+?\d{1,15})$/, "must be up to 11 letters or digits, or a number");
export const REGION = z.string().regex(/^[A-Z]{2}$/, "must be an ISO 3166-1 alpha-2 code such as FR");

/** Parses a decimal amount such as `10.00` into millionths, exactly (no floating point). */
export const MONEY = z
  .string()
  .regex(/^-?\d{1,9}(\.\d{1,6})?$/, "must be an amount such as 10.00")
  .transform((s) => {
    const negative = s.startsWith("-");
    const [whole = "0", frac = ""] = s.replace("-", "").split(".");
    const micros = Number(whole) * 1_000_000 + Number(frac.padEnd(6, "0"));
    return negative ? -micros : micros;
  });

export function formatMoney(micros: number): string {
  const sign = micros < 0 ? "-" : "";
  const abs = Math.abs(micros);
  const whole = Math.floor(abs / 1_000_000);
  const frac = String(abs % 1_000_000)
    .padStart(6, "0")
    .replace(/0{1,4}$/, "");
  return `${sign}${whole}.${frac.padEnd(2, "0")}`;
}

export const NewAccountInput = z.object({
  name: z.string().trim().min(1, "must not be empty").max(200),
  balanceMicros: z.number().int(),
  spendingLimitMicros: z.number().int().min(0),
  features: z.array(z.enum(ACCOUNT_FEATURES)),
  regions: z.array(REGION),
  senderIds: z.array(SENDER_ID).default([]),
});
/** senderIds may be left out (none). */
export type NewAccountInput = z.input<typeof NewAccountInput>;

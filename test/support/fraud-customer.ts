import { FRAUD_DEFAULTS } from "./fraud.js";
import type { TestApp } from "./app.js";
import { SmsReceiver } from "./receivers.js";
import { rest, type Json, type RestAnswer } from "./rest.js";

/**
 * The fraud settings the fraud tests rely on, set explicitly (the test default turns surges off):
 * a destination gets 3 sends per hour, 2 more for each code entered.
 */
export const FRAUD_TEST_ENV = { ...FRAUD_DEFAULTS, FRAUD_NEW_DESTINATION_SENDS: "3" };

/** A funded account sending codes over REST, V1 and V2, and reading its fraud reports. */
export class FraudCustomer {
  private constructor(
    private readonly app: TestApp,
    private readonly sms: SmsReceiver,
    readonly uuid: string,
    readonly key: string,
  ) {}

  static async create(app: TestApp, sms: SmsReceiver, name = "Fraud"): Promise<FraudCustomer> {
    const { account, apiKey } = await app.registry.accounts.create({
      name,
      balanceMicros: 100_000_000,
      spendingLimitMicros: 1_000_000_000,
      features: [],
      regions: [],
      senderIds: [],
    });
    return new FraudCustomer(app, sms, account.customerUuid, apiKey);
  }

  /** POST /v2/verification: the answer's body. */
  async v2(phone: string): Promise<Json> {
    const res = await rest(this.app.baseUrl).call("POST", "/v2/verification", {
      bearer: this.key,
      body: { target: { type: "phone_number", value: phone } },
    });
    if (res.status !== 200) throw new Error(`V2 create answered ${res.status}: ${res.text}`);
    return res.body;
  }

  /** POST /v1/authentication: the answer's body. */
  async v1(phone: string): Promise<Json> {
    const res = await rest(this.app.baseUrl).post(
      "/v1/authentication",
      { customer_uuid: this.uuid, phone_number: phone },
      { "x-api-key": this.key },
    );
    if (res.status !== 200) throw new Error(`V1 send answered ${res.status}: ${res.text}`);
    return res.body;
  }

  /** Checks the code of the last message to `phone` over V2: the answer's status. */
  async verify(phone: string): Promise<string> {
    await this.sms.receiver.until((r) => r.some((m) => (JSON.parse(m.body) as { to: string }).to === phone));
    const message = this.sms.messages.filter((m) => m.to === phone).at(-1);
    if (message === undefined) throw new Error(`no message to ${phone}`);
    const res = await rest(this.app.baseUrl).call("POST", "/v2/verification/check", {
      bearer: this.key,
      body: { target: { type: "phone_number", value: phone }, code: SmsReceiver.code(message) },
    });
    return String(res.body.status);
  }

  /** GET a V2 path with the account's key. */
  get(path: string): Promise<RestAnswer> {
    return rest(this.app.baseUrl).call("GET", path, { bearer: this.key });
  }

  async balance(): Promise<number> {
    return (await this.app.registry.accounts.get(this.uuid))?.balanceMicros ?? Number.NaN;
  }

  /** The decision records as the engine wrote them: [action, rule, phone_number], oldest first. */
  async decisions(): Promise<string[][]> {
    const entries = await this.app.registry.redis.xrange(
      this.app.registry.fraud.keys.decisions(this.uuid),
      "-",
      "+",
    );
    return entries.map(([, flat]) => {
      const f: Record<string, string> = {};
      for (let i = 0; i + 1 < flat.length; i += 2) f[flat[i] ?? ""] = flat[i + 1] ?? "";
      return [f.action ?? "", f.rule ?? "", f.phone_number ?? ""];
    });
  }

  /** The policy hash, as engine.lua reads it. */
  policy(): Promise<Record<string, string>> {
    return this.app.registry.redis.hgetall(this.app.registry.fraud.keys.policy(this.uuid));
  }

  /** Waits until a message reached each of these numbers. */
  async delivered(...phones: string[]): Promise<void> {
    await this.sms.receiver.until((r) => {
      const to = new Set(r.map((m) => (JSON.parse(m.body) as { to: string }).to));
      return phones.every((p) => to.has(p));
    });
  }

  /** How many messages reached `phone`. */
  sentTo(phone: string): number {
    return this.sms.messages.filter((m) => m.to === phone).length;
  }
}

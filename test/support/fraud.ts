export { sample } from "./metrics.js";
import { expect } from "chai";
import { startTestApp, type TestApp } from "./app.js";
import { fundedAccount } from "./v1.js";
import { SmsReceiver } from "./receivers.js";
import { rest, type RestAnswer } from "./rest.js";
import { testPort } from "./ports.js";

/**
 * The fraud engine's settings at their documented defaults (docs/fraud.md): test/support/app.ts
 * turns the engine's surge bound off for the tests of other features, so fraud tests set every
 * setting they rely on.
 */
export const FRAUD_DEFAULTS: Record<string, string> = {
  FRAUD_WINDOW_SECONDS: "3600",
  FRAUD_NEW_DESTINATION_SENDS: "10",
  FRAUD_NEW_DESTINATION_BUDGET: "30",
  FRAUD_RETURNING_DAYS: "90",
  FRAUD_SOURCE_SENDS: "20",
  FRAUD_SOURCE_COUNTRIES: "3",
  FRAUD_SOURCE_SHARE: "0.8",
  FRAUD_COUNTRY_SPREAD: "3",
  FRAUD_BASELINE_DAYS: "14",
  FRAUD_BASELINE_SHARE: "0.1",
  FRAUD_CONVERSION_CREDIT: "2",
  FRAUD_GRACE_SECONDS: "300",
  FRAUD_CONVERSION_MIN_SENDS: "20",
  FRAUD_CONVERSION_DROP: "0.5",
  FRAUD_PREFIX_DIGITS: "6",
  FRAUD_DECISIONS_MAX: "10000",
};

/** One service with an SMS receiver and an admin port, for the fraud engine's tests. */
export class FraudRig {
  private constructor(
    readonly app: TestApp,
    readonly sms: SmsReceiver,
    readonly adminPort: number,
  ) {}

  static async start(env: Record<string, string>): Promise<FraudRig> {
    const sms = await SmsReceiver.start();
    const adminPort = await testPort();
    const app = await startTestApp({
      ...FRAUD_DEFAULTS,
      ADMIN_PORT: String(adminPort),
      SMS_PROVIDER: "http",
      SMS_HTTP_URL: sms.url,
      SMS_PRICES: "default:0.05",
      ...env,
    });
    return new FraudRig(app, sms, adminPort);
  }

  async stop(): Promise<void> {
    await this.app.stop();
    await this.sms.close();
  }

  /** A new account (a new tenant of the engine) with 100.00 to spend. */
  async account(name: string): Promise<Customer> {
    const made = await fundedAccount(this.app.registry.accounts, name, 100_000_000);
    return new Customer(this, made.account.customerUuid, made.apiKey);
  }

  async metrics(): Promise<string> {
    const res = await fetch(`http://127.0.0.1:${this.adminPort}/metrics`);
    expect(res.status).to.equal(200);
    return res.text();
  }

  /** The tenant's decision records, oldest first: `action rule`. */
  async rulesRecorded(tenant: string): Promise<string[]> {
    const { redis, fraud } = this.app.registry;
    const entries = await redis.xrange(fraud.keys.decisions(tenant), "-", "+");
    return entries.map(([, f]) => `${f[f.indexOf("action") + 1]} ${f[f.indexOf("rule") + 1]}`);
  }

  /** Messages the SMS provider received for `phone`. */
  smsTo(phone: string): number {
    return this.sms.messages.filter((m) => m.to === phone).length;
  }

  /** The code of the `nth` message to `phone` (0-based), once it arrived. */
  async codeTo(phone: string, nth = 0): Promise<string> {
    await this.sms.receiver.until(() => this.smsTo(phone) > nth);
    const m = this.sms.messages.filter((x) => x.to === phone)[nth];
    if (m === undefined) throw new Error("no message");
    return SmsReceiver.code(m);
  }
}

/** An account calling V1 and V2 over REST. */
export class Customer {
  constructor(
    readonly rig: FraudRig,
    readonly uuid: string,
    readonly key: string,
  ) {}

  private get http() {
    return rest(this.rig.app.baseUrl);
  }

  v1Send(phone: string, extra: Record<string, unknown> = {}): Promise<RestAnswer> {
    return this.http.post(
      "/v1/authentication",
      { customer_uuid: this.uuid, phone_number: phone, ...extra },
      { "x-api-key": this.key },
    );
  }

  v1Check(authUuid: string, code: string): Promise<RestAnswer> {
    return this.http.post(
      "/v1/check",
      { customer_uuid: this.uuid, authentication_uuid: authUuid, check_code: code },
      { "x-api-key": this.key },
    );
  }

  v1Retry(authUuid: string): Promise<RestAnswer> {
    return this.http.post(
      "/v1/retry",
      { customer_uuid: this.uuid, authentication_uuid: authUuid },
      { "x-api-key": this.key },
    );
  }

  v1Feedback(phone: string, status: "onboarded" | "not_onboarded"): Promise<RestAnswer> {
    return this.http.post(
      "/v1/authentication/feedback",
      { customer_uuid: this.uuid, phone_number: phone, status },
      { "x-api-key": this.key },
    );
  }

  v2Create(phone: string, signals?: Record<string, unknown>): Promise<RestAnswer> {
    return this.http.call("POST", "/v2/verification", {
      body: { target: { type: "phone_number", value: phone }, ...(signals ? { signals } : {}) },
      bearer: this.key,
    });
  }

  v2Check(phone: string, code: string): Promise<RestAnswer> {
    return this.http.call("POST", "/v2/verification/check", {
      body: { target: { type: "phone_number", value: phone }, code },
      bearer: this.key,
    });
  }

  async balanceMicros(): Promise<number> {
    const a = await this.rig.app.registry.accounts.get(this.uuid);
    if (a === undefined) throw new Error("no account");
    return a.balanceMicros;
  }

  /** A V1 send whose code arrives and is checked right (a converting user). */
  async v1Converting(phone: string): Promise<void> {
    const before = this.rig.smsTo(phone);
    const sent = await this.v1Send(phone);
    expect(sent.body.status, `${phone}: ${sent.text}`).to.equal("pending");
    const code = await this.rig.codeTo(phone, before);
    const checked = await this.v1Check(String(sent.body.authentication_uuid), code);
    expect(checked.body.status).to.equal("valid");
  }
}

/**
 * French mobile numbers in distinct ranges: `+336<d><nnnn>000`, the network by its leading digit
 * (libphonenumber's carrier data: every +3361 number is SFR 208-09, +3366 Bouygues 208-20, +3367
 * Orange 208-01); the prefix destination (6 digits) changes every 100 numbers.
 */
export const FR_NETWORKS = {
  sfr: { digit: "1", id: "208-09" },
  bouygues: { digit: "6", id: "208-20" },
  orange: { digit: "7", id: "208-01" },
};

export function frNumber(network: keyof typeof FR_NETWORKS, n: number): string {
  return `+336${FR_NETWORKS[network].digit}${String(n).padStart(4, "0")}000`;
}

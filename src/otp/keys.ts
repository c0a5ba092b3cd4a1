import type { Keys } from "../redis/client.js";

// The keys of the one-time-code machinery that several domains share: windows and challenges.

/**
 * The one home of the rate-limit window keys (`rl`), whichever domain counts with them
 * (otp/window.lua's sliding windows). Windows that one script takes together share a hash tag:
 * the customer's for sends, the app's for logins, the user's for step-up.
 */
export class WindowKeys {
  constructor(private readonly keys: Keys) {}

  private rl(tag: string, ...suffix: string[]): string {
    return this.keys.key("rl", tag, ...suffix);
  }

  /** Verification sends of a customer: per number, IP address, device and the whole account. */
  sendNumber(customer: string, phone: string): string {
    return this.rl(customer, "num", phone);
  }
  sendAddress(customer: string, ip: string): string {
    return this.rl(customer, "ip", ip);
  }
  sendDevice(customer: string, device: string): string {
    return this.rl(customer, "dev", device);
  }
  sendAccount(customer: string): string {
    return this.rl(customer, "acct");
  }
  /** Reads of a customer's fraud reports (REPORTS_LIMIT_ACCOUNT). */
  reports(customer: string): string {
    return this.rl(customer, "reports");
  }

  /** The prefix every login window of an app starts with (`<tag>:`): one hash tag. */
  appTag(appId: string): string {
    return this.rl(appId);
  }
  /** Login codes to one identifier of an app (its value compared without case). */
  loginIdentifier(appId: string, type: string, value: string): string {
    return this.rl(appId, "ident", type, value.toLowerCase());
  }
  /**
   * Login codes to one identifier of an app asked from one network (`source`: the keyed hash of
   * both, src/session/known-sources.ts).
   */
  loginIdentifierFrom(appId: string, source: string): string {
    return this.rl(appId, "ident-from", source);
  }
  login(appId: string): string {
    return this.rl(appId, "login");
  }
  /** Login SMS of an app (APP_SMS_DAILY_LIMIT). */
  appSms(appId: string): string {
    return this.rl(appId, "sms");
  }
  loginAddress(appId: string, subject: string): string {
    return this.rl(appId, "login-ip", subject);
  }
  /** SMS sends of an app into a number range (its first digits). */
  range(appId: string, prefix: string): string {
    return this.rl(appId, "range", prefix);
  }
  /** Login code checks for one identifier of an app, across its challenges. */
  identifierChecks(appId: string, type: string, value: string): string {
    return this.rl(appId, "checks", type, value.toLowerCase());
  }
  /** Login code checks for one identifier of an app from one network (`source`, as above). */
  identifierChecksFrom(appId: string, source: string): string {
    return this.rl(appId, "checks-from", source);
  }

  /** Step-up code checks of a user, across its challenges. */
  userChecks(userId: string): string {
    return this.rl(userId, "checks");
  }
  /** Step-up codes of a user, or of one of its sessions. */
  stepUp(userId: string, sessionId?: string): string {
    return sessionId === undefined ? this.rl(userId, "stepup") : this.rl(userId, "stepup", sessionId);
  }
  /** Delegated step-up decisions (calls to the app's hook) of a user, or of one of its sessions. */
  hookCalls(userId: string, sessionId?: string): string {
    return sessionId === undefined ? this.rl(userId, "hook") : this.rl(userId, "hook", sessionId);
  }

  /** Failed token requests of an OAuth client (`clientDigest`: never the caller's raw id). */
  clientTokenFailures(clientDigest: string): string {
    return this.rl(`client:${clientDigest}`, "token-failures");
  }
  /** Failed token requests from one address (its limit subject). */
  addressTokenFailures(subject: string): string {
    return this.rl(`ip:${subject}`, "token-failures");
  }
  /** Failed password logins to one identifier of an app (its value compared without case). */
  passwordFailures(appId: string, type: string, value: string): string {
    return this.rl(appId, "pwd-failures", type, value.toLowerCase());
  }
  /** Failed password logins to one identifier of an app from one network (`source`, as above). */
  passwordFailuresFrom(appId: string, source: string): string {
    return this.rl(appId, "pwd-failures-from", source);
  }
  /** Failed password logins from one address (its limit subject), across apps. */
  addressPasswordFailures(subject: string): string {
    return this.rl(`ip:${subject}`, "pwd-failures");
  }
  /** Failed API keys from one address (its limit subject). */
  apiKeyFailures(subject: string): string {
    return this.rl(`ip:${subject}`, "apikey-failures");
  }
  /** Wrong delivery-report tokens from one address (its limit subject). */
  statusTokenFailures(subject: string): string {
    return this.rl(`ip:${subject}`, "status-token-failures");
  }
}

/**
 * The one home of the code challenge records (`chal`) that src/otp/challenge.ts stores and
 * otp/check-code.lua checks, whichever domain issues them. Each is keyed by its id, the hash of
 * its token's secret.
 */
export class ChallengeKeys {
  constructor(private readonly keys: Keys) {}

  /** A login challenge (src/session/challenges.ts), under its own hash tag. */
  login(id: string): string {
    return this.keys.key("chal", id);
  }

  /** A step-up challenge (src/stepup/challenges.ts), under its user's hash tag, beside its sessions. */
  stepUp(userId: string, id: string): string {
    return this.keys.key("chal", userId, id);
  }
}

import { randomBytes, randomUUID } from "node:crypto";
import { verify } from "@node-rs/argon2";
import { refusedBy, RingfenceError } from "../errors.js";
import type { CallScope } from "../observability/calls.js";
import { limitSubject } from "../net/cidr.js";
import { takeWindows, tooManyAttempts, type Window, type WindowRule } from "../otp/code.js";
import { WindowKeys } from "../otp/keys.js";
import type { Keys, RedisClient } from "../redis/client.js";
import { hashPassword } from "./password.js";
import type { Identifier } from "./identity.js";
import { identifierWindows, type LoginSource } from "./known-sources.js";
import type { User, UserStore } from "./users.js";

/** The settings whose windows these are, named in refusals (the metric, the request log). */
export type PasswordFailureSetting = "PASSWORD_FAILURES_IDENTIFIER" | "PASSWORD_FAILURES_IP";

/** The one answer to a wrong password, an unknown identifier and a user without a password. */
export function invalidCredentials(): RingfenceError {
  return new RingfenceError("invalid_credentials", "the identifier or the password is wrong");
}

/** A login's places in the failure windows: kept when it fails, given back when it succeeds. */
export interface PasswordAttempt {
  succeeded(): Promise<void>;
}

/**
 * Failed password logins (docs/session-api.md#password-login), in sliding windows per app and
 * identifier (PASSWORD_FAILURES_IDENTIFIER) and per client address across apps
 * (PASSWORD_FAILURES_IP). Unlike the token endpoint's windows, a full window refuses every
 * attempt, right password or wrong (docs/session-api.md#abuse-limits): someone guessing must not learn, by the
 * answer, that a guess was right. So each attempt takes a place in the windows before its
 * password is checked (atomically per hash tag: concurrent attempts get at most the limit's worth
 * of checks between them, from any number of processes) and gives them back when the password
 * was right; a failure keeps them. The identifier's window refuses strangers only: a known source
 * meets its own (docs/session-api.md#known-sources), on the same tag, the app's; the address's
 * window lives on the address's tag.
 */
export class PasswordFailures {
  private readonly windowKeys: WindowKeys;

  constructor(
    private readonly redis: RedisClient,
    keys: Keys,
    private readonly rules: { perIdentifier: WindowRule; perAddress: WindowRule },
  ) {
    this.windowKeys = new WindowKeys(keys);
  }

  /** Takes the attempt's places; throws the 429 to answer when a window is full (nothing kept). */
  begin(appId: string, id: Identifier, source: LoginSource | undefined): Promise<PasswordAttempt> {
    return this.beginFor(appId, [{ id, source }], source?.address);
  }

  /**
   * The same for an attempt on a user, not on one identifier (a passkey's): a place in the window
   * of each identifier the user holds (none when the credential is unknown) and in the address's.
   */
  async beginFor(
    appId: string,
    targets: readonly { id: Identifier; source: LoginSource | undefined }[],
    address: string | undefined,
  ): Promise<PasswordAttempt> {
    const groups = this.windowsOf(appId, targets, address);
    const member = randomUUID();
    const taken = await Promise.all(
      groups.map(async (g) => ({
        ...g,
        waitMs: (await takeWindows(this.redis, g.windows, member)).waitMs,
      })),
    );
    const full = taken.find((t) => t.waitMs > 0);
    const release = () =>
      Promise.all(
        taken.filter((t) => t.waitMs === 0).map((t) => takeWindows(this.redis, t.windows, member, "remove")),
      ).then(() => undefined);
    if (full !== undefined) {
      await release();
      throw refusedBy(
        full.setting,
        tooManyAttempts("too many failed password logins: try again later", full.waitMs),
      );
    }
    return { succeeded: release };
  }

  /** The windows of an attempt, by hash tag: each group is taken by one script. */
  private windowsOf(
    appId: string,
    targets: readonly { id: Identifier; source: LoginSource | undefined }[],
    address: string | undefined,
  ): { windows: Window[]; setting: PasswordFailureSetting }[] {
    const groups: { windows: Window[]; setting: PasswordFailureSetting }[] = [];
    const { perIdentifier, perAddress } = this.rules;
    if (perIdentifier !== null) {
      for (const { id, source } of targets) {
        const key = this.windowKeys.passwordFailures(appId, id.type, id.value);
        const windows = identifierWindows({ key, rule: perIdentifier }, source, (digest) =>
          this.windowKeys.passwordFailuresFrom(appId, digest),
        );
        groups.push({ windows, setting: "PASSWORD_FAILURES_IDENTIFIER" });
      }
    }
    if (address !== undefined && perAddress !== null) {
      const key = this.windowKeys.addressPasswordFailures(limitSubject(address));
      groups.push({ windows: [{ key, rule: perAddress }], setting: "PASSWORD_FAILURES_IP" });
    }
    return groups;
  }
}

/**
 * Checks passwords against the users' argon2id hashes with the library's asynchronous `verify`,
 * which runs on libuv's thread pool, not on the event loop. An unknown identifier and a user
 * without a password are checked against a hash of a random password made when this starts, with
 * the same parameters as stored passwords (stepup/password.ts), so all three failures take about
 * the time of one verification.
 */
export class PasswordChecker {
  private readonly dummyHash: Promise<string>;

  constructor(private readonly users: Pick<UserStore, "credentials">) {
    this.dummyHash = hashPassword(randomBytes(24).toString("base64url"));
    // Awaited by the first unknown identifier; a failure here shows there, not as an unhandled rejection.
    this.dummyHash.catch(() => undefined);
  }

  /** The user whose password `password` is; undefined for any of the three failures. */
  async check(appId: string, id: Identifier, password: string, call: CallScope): Promise<User | undefined> {
    const found = await this.users.credentials(appId, id);
    const stored = found?.passwordHash;
    if (found === undefined || stored === undefined) {
      await matches(await this.dummyHash, password);
      return undefined;
    }
    try {
      return (await matches(stored, password)) ? found.user : undefined;
    } catch {
      // A stored hash the library cannot read: the user cannot log in with a password.
      call.log.warn("unreadable password hash", { user_id: found.user.userId });
      return undefined;
    }
  }
}

/** As stored passwords were hashed: NFKC-normalized (stepup/password.ts). */
function matches(hash: string, password: string): Promise<boolean> {
  return verify(hash, password.normalize("NFKC"));
}

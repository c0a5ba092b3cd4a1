import type { AuthenticationResponseJSON } from "@simplewebauthn/server";
import type { AppEvents } from "../apps/webhooks.js";
import { RingfenceError } from "../errors.js";
import type { Metrics } from "../observability/metrics.js";
import type { CallContext } from "../rpc/binding.js";
import type { KnownSources, LoginSource } from "../session/known-sources.js";
import type { PasswordFailures } from "../session/password-login.js";
import type { Identifier } from "../session/identity.js";
import type { User, UserStore } from "../session/users.js";
import { readAssertion, requestOptions, verifyAssertion } from "./ceremony.js";
import type { RelyingParties, RelyingParty } from "./relying-party.js";
import type { PasskeyStore } from "./store.js";

/** Where an assertion is checked: a login, or a `verify_passkey` step-up step. */
export type PasskeyUse = "login" | "step_up";

/** The one answer to every assertion refused (docs/session-api.md#passkeys). */
export function passkeyRefused(): RingfenceError {
  return new RingfenceError("invalid_credentials", "the passkey was not accepted");
}

/** A challenge an assertion answers, taken from where it was kept. */
export interface TakenChallenge {
  appId: string;
  challenge: string;
  /**
   * Consumes the challenge once the attempt has its places in the windows (a refused attempt
   * writes nothing more); false when an earlier attempt consumed it.
   */
  consume(): Promise<boolean>;
  expiresAtMs: number;
}

/** A verified assertion: whose passkey, and whether the authenticator verified the user. */
export interface Asserted {
  user: User;
  userVerified: boolean;
  /** The user's identifiers as the call's address meets their windows. */
  sources: { id: Identifier; source: LoginSource | undefined }[];
}

/**
 * Checks assertions for logins and step-ups alike (docs/session-api.md#passkeys): the attempt
 * takes its places in the password failure windows (each identifier of the credential's user, and
 * the address), then the challenge (consumed by any attempt), the credential (known, the app's, of
 * the expected user), origin, RP ID and signature, and last the counter, moved atomically: one
 * going backwards emits `passkey.suspicious`. Every refusal is the same 401 and keeps its places;
 * a success gives them back.
 */
export class Passkeys {
  constructor(
    private readonly d: {
      relyingParties: RelyingParties;
      store: PasskeyStore;
      users: Pick<UserStore, "get">;
      failures: Pick<PasswordFailures, "beginFor">;
      knownSources: Pick<KnownSources, "of" | "remember" | "firstKnown">;
      events: Pick<AppEvents, "emit">;
      metrics: Pick<Metrics, "passkeyAssertion">;
    },
  ) {}

  relyingParty(appId: string): Promise<RelyingParty> {
    return this.d.relyingParties.of(appId);
  }

  holdsAny(userId: string): Promise<boolean> {
    return this.d.store.holdsAny(userId);
  }

  /** Request options naming the user's passkeys, for a step-up step; undefined without any. */
  async stepOptions(
    appId: string,
    userId: string,
  ): Promise<{ challenge: string; options: Record<string, unknown> } | undefined> {
    const rp = await this.d.relyingParties.get(appId);
    const held = await this.d.store.list(userId);
    if (rp === undefined || held.length === 0) return undefined;
    const options = await requestOptions(rp, held);
    return { challenge: options.challenge, options };
  }

  /**
   * The user's identifiers as the call's address meets their windows. A passkey is the user's,
   * not one identifier's: a network known for any of them is known for all (each still meets its
   * own window), so strangers filling one identifier's window cannot stop the user at home.
   */
  private async sourcesOf(
    appId: string,
    identifiers: readonly Identifier[],
    address: string | undefined,
  ): Promise<{ id: Identifier; source: LoginSource | undefined }[]> {
    const sources = identifiers.map((id) => ({ id, source: this.d.knownSources.of(appId, id, address) }));
    const keys = sources.flatMap((s) => (s.source === undefined ? [] : [s.source.key]));
    if (keys.length < 2) return sources;
    const known = await this.d.knownSources.firstKnown(keys);
    if (known === undefined) return sources;
    return sources.map((s) => (s.source === undefined ? s : { ...s, source: { ...s.source, key: known } }));
  }

  /** Reads a credential's shape: 400 naming the field, before anything is taken or counted. */
  read(credential: unknown): AuthenticationResponseJSON {
    return readAssertion(credential);
  }

  async assert(
    use: PasskeyUse,
    taken: TakenChallenge,
    response: AuthenticationResponseJSON,
    call: CallContext,
    expectedUserId?: string,
  ): Promise<Asserted> {
    const { store, users, failures, knownSources, metrics } = this.d;
    const rp = await this.d.relyingParties.of(taken.appId);
    const ownerId = await store.ownerOf(response.id);
    const owner = ownerId === undefined ? undefined : await users.get(ownerId);
    const user = owner?.appId === taken.appId ? owner : undefined;
    const sources = await this.sourcesOf(taken.appId, user?.identifiers ?? [], call.clientAddress);
    let attempt;
    try {
      attempt = await failures.beginFor(taken.appId, sources, call.clientAddress);
    } catch (err) {
      if (err instanceof RingfenceError && err.code === "too_many_attempts") {
        metrics.passkeyAssertion(use, "too_many_attempts");
      }
      throw err;
    }
    const refuse = (
      reason: string,
      outcome: "invalid_credentials" | "counter_backwards" = "invalid_credentials",
    ) => {
      metrics.passkeyAssertion(use, outcome);
      call.log.info("passkey refused", { reason, use });
      return passkeyRefused();
    };
    if (!(await taken.consume())) throw refuse("the challenge was used already");
    if (taken.expiresAtMs <= Date.now()) throw refuse("the challenge expired");
    if (user === undefined) throw refuse("unknown credential");
    if (expectedUserId !== undefined && user.userId !== expectedUserId)
      throw refuse("another user's credential");
    const handle = response.response.userHandle;
    if (handle !== undefined && Buffer.from(handle, "base64url").toString("utf8") !== user.userId) {
      throw refuse("the user handle is not the credential's user");
    }
    const passkey = await store.get(user.userId, response.id);
    if (passkey === undefined) throw refuse("unknown credential");
    const verified = await verifyAssertion(response, taken.challenge, rp, passkey);
    if (!verified.ok) throw refuse(verified.reason);
    const used = await store.use(user.userId, passkey.id, verified.counter);
    if (used === "gone") throw refuse("unknown credential");
    if (used === "backwards") {
      await this.d.events.emit(
        taken.appId,
        "passkey.suspicious",
        { app_id: taken.appId, user_id: user.userId, credential_id: passkey.id },
        { call },
      );
      throw refuse("the signature counter went backwards: a cloned authenticator?", "counter_backwards");
    }
    await Promise.all([attempt.succeeded(), ...sources.map((s) => knownSources.remember(s.source))]);
    metrics.passkeyAssertion(use, "success");
    return { user, userVerified: verified.userVerified, sources };
  }
}

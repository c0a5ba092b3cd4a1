import { ChallengeKeys } from "../otp/keys.js";
import type { Keys } from "../redis/client.js";
import type { Identifier } from "./identity.js";

/**
 * Every key of the session domain (names stay as stored: existing users and sessions keep
 * working). A user, its sessions and their index share the user's hash tag; an app's identifier
 * index and known sources share the app's (its login windows are src/otp/keys.ts's).
 */
export class SessionKeys {
  private readonly challenges: ChallengeKeys;

  constructor(private readonly keys: Keys) {
    this.challenges = new ChallengeKeys(keys);
  }

  /** The user (hash). */
  user(userId: string): string {
    return this.keys.key("user", userId);
  }

  /** The index entry of an identifier of an app (its value compared without case) → user id. */
  identifier(appId: string, id: Identifier): string {
    return this.keys.key("ident", appId, id.type, id.value.toLowerCase());
  }

  /** A session (hash: app, refresh hash, amr, acr, auth_time). */
  session(userId: string, sessionId: string): string {
    return this.keys.key("sess", userId, sessionId);
  }

  /** The refresh hashes a session rotated out. */
  sessionUsed(userId: string, sessionId: string): string {
    return this.keys.key("sess", userId, sessionId, "used");
  }

  /** A session's scope grants (scope → {untilMs, mode, jti}). */
  sessionGrants(userId: string, sessionId: string): string {
    return this.keys.key("sess", userId, sessionId, "grants");
  }

  /** The user's sessions (sorted set: session id scored by the time its keys expire). */
  sessions(userId: string): string {
    return this.keys.key("sessions", userId);
  }

  /** A known source of an identifier of an app (`digest`: src/session/known-sources.ts). */
  knownSource(appId: string, digest: string): string {
    return this.keys.key("known", appId, digest);
  }

  /** A login challenge, under its own hash tag. */
  loginChallenge(id: string): string {
    return this.challenges.login(id);
  }
}

import type { AppStore } from "../apps/store.js";
import type { Secrets } from "../crypto/secrets.js";
import { badField, quote, RingfenceError } from "../errors.js";
import type { PasskeyServiceService } from "../gen/ringfence/session/v1/passkey_service.js";
import type { Metrics } from "../observability/metrics.js";
import { noStore, type Handlers } from "../rpc/binding.js";
import type { OpenLogin } from "../session/open-login.js";
import { userOf } from "../session/tokens.js";
import type { UserStore } from "../session/users.js";
import { creationOptions, readRegistration, requestOptions, verifyRegistration } from "./ceremony.js";
import type { Passkeys } from "./passkeys.js";
import type { RelyingParties } from "./relying-party.js";
import { CHALLENGE_TTL_MS, MAX_PASSKEYS, type PasskeyStore } from "./store.js";

export interface PasskeyDeps {
  secrets: Pick<Secrets, "encrypt" | "decrypt">;
  apps: Pick<AppStore, "get">;
  users: Pick<UserStore, "get">;
  relyingParties: RelyingParties;
  store: PasskeyStore;
  passkeys: Passkeys;
  /** Opens the session of a login (the session module's). */
  openLogin: OpenLogin;
  metrics: Pick<Metrics, "passkeyRegistration">;
}

const LOGIN_CHALLENGE = "passkey-login";

/**
 * A login challenge travels sealed in its token (SECRETS_KEY, AES-GCM): asking for login options
 * writes nothing to Redis, so strangers asking for them fill nothing. Its use is marked in Redis
 * until it expires (PasskeyStore.useLoginChallenge).
 */
function sealLoginChallenge(secrets: PasskeyDeps["secrets"], appId: string, challenge: string): string {
  const sealed = secrets.encrypt(
    JSON.stringify({ p: LOGIN_CHALLENGE, a: appId, c: challenge, e: Date.now() + CHALLENGE_TTL_MS }),
  );
  return `pl_${sealed}`;
}

function openLoginChallenge(
  secrets: PasskeyDeps["secrets"],
  token: string,
): { appId: string; challenge: string; expiresAtMs: number } | undefined {
  if (!token.startsWith("pl_") || token.length > 1_024) return undefined;
  try {
    const v = JSON.parse(secrets.decrypt(token.slice(3))) as Record<string, unknown>;
    if (
      v.p !== LOGIN_CHALLENGE ||
      typeof v.a !== "string" ||
      typeof v.c !== "string" ||
      typeof v.e !== "number"
    )
      return undefined;
    return { appId: v.a, challenge: v.c, expiresAtMs: v.e };
  } catch {
    return undefined;
  }
}

/** Registration, listing and removal from a user session, and the passkey login (docs/session-api.md#passkeys). */
export function passkeyHandlers(deps: PasskeyDeps): Handlers<typeof PasskeyServiceService> {
  return {
    async createPasskeyOptions(_req, ctx) {
      noStore(ctx);
      const caller = userOf(ctx);
      const rp = await deps.relyingParties.of(caller.appId);
      const [app, user, held] = await Promise.all([
        deps.apps.get(caller.appId),
        deps.users.get(caller.userId),
        deps.store.list(caller.userId),
      ]);
      if (user === undefined) throw new RingfenceError("invalid_token", "the user no longer exists");
      const name = user.identifiers[0]?.value ?? user.userId;
      const options = await creationOptions(
        rp,
        app?.name ?? caller.appId,
        { userId: user.userId, name },
        held,
      );
      await deps.store.startRegistration(caller.userId, caller.sessionId, String(options.challenge));
      return { options };
    },

    async registerPasskey(req, ctx) {
      noStore(ctx);
      const caller = userOf(ctx);
      const rp = await deps.relyingParties.of(caller.appId);
      const response = readRegistration(req.credential);
      const challenge = await deps.store.takeRegistration(caller.userId, caller.sessionId);
      if (challenge === undefined) {
        deps.metrics.passkeyRegistration("expired_challenge");
        throw new RingfenceError(
          "expired_challenge",
          "no registration is pending for this session: ask /v1/session/me/passkeys/options again (its challenge lives 5 minutes and answers one attempt)",
        );
      }
      let credential;
      try {
        credential = await verifyRegistration(response, challenge, rp);
      } catch (err) {
        deps.metrics.passkeyRegistration("invalid_credential");
        throw err;
      }
      const createdAt = new Date().toISOString();
      const added = await deps.store.add(caller.userId, { ...credential, createdAt });
      if (added !== "added") {
        deps.metrics.passkeyRegistration(added === "taken" ? "taken" : "too_many");
        throw added === "taken"
          ? badField("credential.id", "this credential is registered already")
          : badField("credential", `a user holds at most ${MAX_PASSKEYS} passkeys: remove one first`);
      }
      deps.metrics.passkeyRegistration("success");
      return { id: credential.id, createdAt };
    },

    async listPasskeys(_req, ctx) {
      noStore(ctx);
      const caller = userOf(ctx);
      await deps.relyingParties.of(caller.appId);
      const held = await deps.store.list(caller.userId);
      return {
        passkeys: held.map((p) => ({
          id: p.id,
          createdAt: p.createdAt,
          ...(p.lastUsedAt === undefined ? {} : { lastUsedAt: p.lastUsedAt }),
        })),
      };
    },

    async deletePasskey(req, ctx) {
      noStore(ctx);
      const caller = userOf(ctx);
      await deps.relyingParties.of(caller.appId);
      if (req.id === "") throw badField("id", "is required");
      if (!(await deps.store.remove(caller.userId, req.id))) {
        throw new RingfenceError("not_found", `id: no passkey ${quote(req.id)} of this user`);
      }
      return {};
    },

    async startPasskeyLogin(req, ctx) {
      noStore(ctx);
      if (req.appId === "") throw badField("app_id", "is required");
      const app = await deps.apps.get(req.appId);
      if (app === undefined) throw badField("app_id", "unknown app");
      const rp = await deps.relyingParties.of(app.appId);
      const options = await requestOptions(rp);
      return { challengeToken: sealLoginChallenge(deps.secrets, app.appId, options.challenge), options };
    },

    async loginWithPasskey(req, ctx) {
      noStore(ctx);
      if (req.challengeToken === "") throw badField("challenge_token", "is required");
      const response = deps.passkeys.read(req.credential);
      const opened = openLoginChallenge(deps.secrets, req.challengeToken);
      if (opened === undefined) {
        throw badField("challenge_token", "is not a passkey login challenge of this service");
      }
      const consume = () => deps.store.useLoginChallenge(opened.challenge, opened.expiresAtMs);
      const { user, userVerified } = await deps.passkeys.assert(
        "login",
        { ...opened, consume },
        response,
        ctx,
      );
      // RFC 8176: a software or hardware key; with user verification, a second factor in one.
      return deps.openLogin(
        {
          userId: user.userId,
          appId: opened.appId,
          amr: userVerified ? ["swk", "mfa"] : ["swk"],
          acr: userVerified ? "2" : "1",
        },
        ctx,
      );
    },
  };
}

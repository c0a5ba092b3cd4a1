import type { AppsModule } from "../apps/module.js";
import type { Module, SharedParts } from "../lifecycle/module.js";
import { bindService } from "../rpc/binding.js";
import type { SessionModule } from "../session/module.js";
import { Passkeys } from "./passkeys.js";
import { RelyingParties } from "./relying-party.js";
import { passkeyHandlers, type PasskeyDeps } from "./service.js";
import { PasskeyStore } from "./store.js";
import { PASSKEYS } from "./surface.js";

/** What the passkey module takes of the process (src/registry.ts gives it). */
export interface PasskeyNeeds extends Pick<SharedParts, "redis" | "keys" | "secrets" | "metrics"> {
  apps: PasskeyDeps["apps"];
  users: PasskeyDeps["users"];
}

export interface PasskeyModule extends Module {
  /** Assertions for a `verify_passkey` step-up step. */
  passkeys: Passkeys;
}

/**
 * Passkeys (docs/session-api.md#passkeys): each app's relying party, users' credentials, the
 * passkey login, whose attempts count in the password login's windows and whose session the
 * session module opens.
 */
export function passkeyModule(
  r: PasskeyNeeds,
  d: { apps: AppsModule; session: Pick<SessionModule, "authenticate" | "logins"> },
): PasskeyModule {
  const relyingParties = new RelyingParties(r.redis, r.keys);
  const store = new PasskeyStore(r.redis, r.keys);
  const passkeys = new Passkeys({
    relyingParties,
    store,
    users: r.users,
    failures: d.session.logins.failures,
    knownSources: d.session.logins.knownSources,
    events: d.apps.events,
    metrics: r.metrics,
  });
  const handlers = passkeyHandlers({
    secrets: r.secrets,
    apps: r.apps,
    users: r.users,
    relyingParties,
    store,
    passkeys,
    openLogin: d.session.logins.open,
    metrics: r.metrics,
  });
  return {
    name: "passkeys",
    passkeys,
    bindings: [
      bindService(PASSKEYS.definition, handlers, {
        ...PASSKEYS.surface,
        authenticators: { session: d.session.authenticate },
      }),
    ],
  };
}

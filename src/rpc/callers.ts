import type { StoredAccount } from "../accounts/account.js";
import type { StoredApp } from "../apps/app.js";
import type { Caller as SessionCaller } from "../session/tokens.js";
import type { CallerKind } from "./surface.js";

/**
 * What the authentication chain of each kind of caller finds; src/rpc/surface.ts declares the
 * kind of each method, so a handler knows which one it is given.
 */
export interface CallerTypes {
  /** An account, by its API key (V1 and V2). */
  account: StoredAccount;
  /** A user, by a session access token. */
  session: SessionCaller;
  /** An app, by its management API key. */
  app: StoredApp;
}

/** Who calls, tagged with its kind: what the binding puts on the call context. */
export type Caller = { [K in CallerKind]: { readonly kind: K; readonly who: CallerTypes[K] } }[CallerKind];

import { RingfenceError } from "../errors.js";

/** 1 November 2025 00:00:00 UTC, the end of support, as an RFC 9745 Deprecation date. */
export const V1_DEPRECATION = "@1761955200";
/** Removal planned by April 2026 (RFC 8594). */
export const V1_SUNSET = "Wed, 01 Apr 2026 00:00:00 GMT";

export type V1Successor = "lookup" | "verify";

/**
 * Where each V1 API's successor lives, as the `Link` of every V1 answer names it (RFC 8288; a
 * reference relative to the V1 URL, so it points to the same host whatever it is called).
 * A lookup's answer names the V2 path of its own number (see lookupSuccessorLink).
 */
export const V1_SUCCESSORS: Readonly<Record<V1Successor, string>> = {
  verify: "/v2/verification",
  lookup: "/v2/lookup",
};

/** The `Link` header naming a V1 call's successor path. */
export function successorLink(path: string): string {
  return `<${path}>; rel="successor-version"`;
}

/** What every V1 service declares of its surface: V1 error bodies, its calls deprecated. */
export const V1_SURFACE = { dialect: "v1", deprecated: true } as const;

/** How every V1 service answers beyond its surface: deprecation headers, and 410 once switched off. */
export function v1ServiceOptions(
  config: { DOCS_URL: string; V1_AFTER_SUNSET: "serve" | "gone" },
  successor: V1Successor,
) {
  return {
    headers: {
      deprecation: V1_DEPRECATION,
      sunset: V1_SUNSET,
      link: successorLink(V1_SUCCESSORS[successor]),
    },
    guard: () => {
      if (config.V1_AFTER_SUNSET === "gone") {
        throw new RingfenceError("gone", `the V1 API was removed; use the V2 ${successor} API`);
      }
    },
  };
}

/** The password-change scope of the specification. */
export const PWD = "svc:pwd:write";

/** A direct `review` entry for PWD: one step by `stepKey` for users holding `identifierType`. */
export function reviewEntry(identifierType: "email_address" | "phone_number", stepKey: string) {
  return {
    scope: PWD,
    mode: "direct",
    direct: {
      identifier_types: [identifierType] as string[],
      status: "review",
      granted_for: 300,
      grant_mode: "single-use",
      steps: [{ order: 1, key: stepKey, expiration_duration: 300 }],
    },
  };
}

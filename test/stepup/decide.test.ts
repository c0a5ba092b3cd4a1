import { expect } from "chai";
import type { DelegatedEntry, DirectEntry, IdentifierType, StepUpConfig } from "../../src/stepup/config.js";
import { decide } from "../../src/stepup/decide.js";

const SCOPE = "svc:pwd:write";

function directEntry(scope: string, type: IdentifierType): DirectEntry {
  return {
    scope,
    mode: "direct",
    identifierTypes: [type],
    status: "review",
    grantedFor: 300,
    grantMode: "single-use",
    steps: [
      {
        order: 1,
        key: type === "email_address" ? "verify_email" : "verify_sms",
        expirationDuration: 300,
      },
    ],
  };
}

const email = directEntry(SCOPE, "email_address");
const phone = directEntry(SCOPE, "phone_number");
const hook: DelegatedEntry = { scope: SCOPE, mode: "delegated", url: "https://app.example/hook" };
const otherScope = directEntry("svc:billing:write", "phone_number");

function config(...entries: StepUpConfig["entries"]): StepUpConfig {
  return { jwksUrl: "https://app.example/jwks.json", stepKeys: [], entries };
}

const held = (...types: IdentifierType[]) => ({ identifierTypes: new Set(types), passkey: false });

describe("step-up decision", () => {
  const spec = config(otherScope, email, hook, phone);

  it("a user with only a phone number gets the phone entry", () => {
    const got = decide(spec, SCOPE, held("phone_number"));
    expect(got).to.deep.equal({ kind: "direct", entry: phone });
    expect(got.kind === "direct" && got.entry).to.equal(phone);
  });

  it("a user with only an email address gets the email entry", () => {
    const got = decide(spec, SCOPE, held("email_address"));
    expect(got.kind === "direct" && got.entry).to.equal(email);
  });

  it("a user with both gets the first entry declared", () => {
    expect(decide(spec, SCOPE, held("phone_number", "email_address"))).to.deep.equal({
      kind: "direct",
      entry: email,
    });
    const phoneFirst = config(phone, email);
    const got = decide(phoneFirst, SCOPE, held("email_address", "phone_number"));
    expect(got.kind === "direct" && got.entry).to.equal(phone);
  });

  it("a direct entry wins over a delegated one declared before it", () => {
    const got = decide(config(hook, phone), SCOPE, held("phone_number"));
    expect(got.kind === "direct" && got.entry).to.equal(phone);
  });

  it("a user holding neither type falls back to the scope's delegated entry", () => {
    expect(decide(spec, SCOPE, held())).to.deep.equal({ kind: "delegated", entry: hook });
    expect(decide(config(phone, hook), SCOPE, held("email_address"))).to.deep.equal({
      kind: "delegated",
      entry: hook,
    });
  });

  it("nothing matches without a delegated entry: none", () => {
    expect(decide(config(email, phone), SCOPE, held())).to.deep.equal({ kind: "none" });
    expect(decide(config(phone), SCOPE, held("email_address"))).to.deep.equal({ kind: "none" });
  });

  it("entries of another scope never match", () => {
    expect(decide(config(otherScope), SCOPE, held("phone_number"))).to.deep.equal({ kind: "none" });
    expect(decide(spec, "svc:unknown", held("phone_number", "email_address"))).to.deep.equal({
      kind: "none",
    });
  });

  it("a verify_passkey entry matches only a user holding a passkey for the app", () => {
    const passkey: DirectEntry = {
      ...phone,
      steps: [{ order: 1, key: "verify_passkey", expirationDuration: 300 }],
    };
    const withPasskey = { identifierTypes: new Set<IdentifierType>(["phone_number"]), passkey: true };
    expect(decide(config(passkey, phone), SCOPE, withPasskey)).to.deep.equal({
      kind: "direct",
      entry: passkey,
    });
    expect(decide(config(passkey, phone), SCOPE, held("phone_number"))).to.deep.equal({
      kind: "direct",
      entry: phone,
    });
    // The entry rules still hold: its identifier types must overlap the user's.
    expect(decide(config(passkey), SCOPE, { ...withPasskey, identifierTypes: new Set() })).to.deep.equal({
      kind: "none",
    });
  });
});

import { expect } from "chai";
import { RingfenceError } from "../../src/errors.js";
import type { DirectEntry, IdentifierType, StepUpConfig } from "../../src/stepup/config.js";
import type { Holdings } from "../../src/stepup/decide.js";
import { ACR_VALUES, type Acr, type SessionLogin } from "../../src/stepup/needs.js";
import {
  needsAuthentication,
  readAuthRequest,
  reauthenticationSteps,
  type AuthRequest,
} from "../../src/stepup/reauthentication.js";
import { EXPIRATION_DURATION, type Step } from "../../src/stepup/rules.js";

const SCOPE = "svc:pwd:write";
const RANK: Record<Acr, number> = { "1": 1, "2": 2 };

function refused(f: () => unknown): RingfenceError {
  try {
    f();
  } catch (err) {
    expect(err).to.be.instanceOf(RingfenceError);
    return err as RingfenceError;
  }
  expect.fail("accepted");
}

const held = (types: IdentifierType[], passkey = false): Holdings => ({
  identifierTypes: new Set(types),
  passkey,
});
const login = (acr: Acr, authTime: number): SessionLogin => ({ amr: ["pwd"], acr, authTime });

function direct(
  status: DirectEntry["status"],
  types: IdentifierType[],
  steps: Step[] = [],
  scope = SCOPE,
): DirectEntry {
  return {
    scope,
    mode: "direct",
    identifierTypes: types,
    status,
    grantedFor: 300,
    grantMode: "single-use",
    steps,
  };
}
const config = (...entries: StepUpConfig["entries"]): StepUpConfig => ({
  jwksUrl: "",
  stepKeys: [],
  entries,
});
const sms = (seconds = 120): Step => ({ order: 1, key: "verify_sms", expirationDuration: seconds });
const mail = (seconds = 120): Step => ({ order: 1, key: "verify_email", expirationDuration: seconds });
const passkey: Step = { order: 1, key: "verify_passkey", expirationDuration: 300 };

describe("step-up reauthentication (RFC 9470 acr_values and max_age)", () => {
  it(`ACR_VALUES is exactly ${JSON.stringify(ACR_VALUES)}, lowest first`, () => {
    expect(ACR_VALUES).to.deep.equal(["1", "2"]);
  });

  describe("readAuthRequest", () => {
    it("answers undefined when the request names neither acr_values nor max_age", () => {
      expect(readAuthRequest({ acrValues: "" })).to.equal(undefined);
      expect(readAuthRequest({ acrValues: "   ", maxAge: undefined })).to.equal(undefined);
    });

    for (const acr of ACR_VALUES) {
      it(`reads acr_values "${acr}" as level ${acr}`, () => {
        expect(readAuthRequest({ acrValues: acr })).to.deep.equal({ acr });
        expect(readAuthRequest({ acrValues: ` ${acr}  ${acr} ` })).to.deep.equal({ acr });
      });
    }

    for (const [values, lowest] of [
      ["1 2", "1"],
      ["2 1", "1"],
      ["2 2 1 2", "1"],
      ["2  2", "2"],
    ] as const) {
      it(`reads acr_values "${values}" as its lowest level, ${lowest}`, () => {
        expect(readAuthRequest({ acrValues: values })).to.deep.equal({ acr: lowest });
      });
    }

    for (const maxAge of [0, 1, 300, 2_147_483_647]) {
      it(`reads max_age ${maxAge}, alone and with acr_values`, () => {
        expect(readAuthRequest({ acrValues: "", maxAge })).to.deep.equal({ maxAge });
        expect(readAuthRequest({ acrValues: "2", maxAge })).to.deep.equal({ acr: "2", maxAge });
      });
    }

    for (const bad of [
      "3",
      "0",
      "gold",
      "2 x",
      "1,2",
      "1\t2",
      "１",
      "2\n",
      "acr1",
      "urn:mace:incommon:iap:silver",
    ]) {
      it(`refuses acr_values ${JSON.stringify(bad)}: bad_request, field acr_values, the message naming ${ACR_VALUES.map((a) => `"${a}"`).join(", ")}`, () => {
        const err = refused(() => readAuthRequest({ acrValues: bad, maxAge: 300 }));
        expect(err.code).to.equal("bad_request");
        expect(err.details).to.deep.equal({ field: "acr_values" });
        for (const acr of ACR_VALUES) expect(err.message).to.include(`"${acr}"`);
      });
    }

    for (const bad of [-1, -0.5, 1.5, Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]) {
      it(`refuses max_age ${bad}: bad_request, field max_age`, () => {
        const err = refused(() => readAuthRequest({ acrValues: "2", maxAge: bad }));
        expect(err.code).to.equal("bad_request");
        expect(err.details).to.deep.equal({ field: "max_age" });
      });
    }

    it("checks acr_values before max_age", () => {
      expect(refused(() => readAuthRequest({ acrValues: "9", maxAge: -1 })).details).to.deep.equal({
        field: "acr_values",
      });
    });
  });

  describe("needsAuthentication (explicit nowMs)", () => {
    const authTime = 1_700_000_000;
    const at = (seconds: number) => (authTime + seconds) * 1000;

    for (const have of ACR_VALUES) {
      for (const want of ACR_VALUES) {
        const short = RANK[have] < RANK[want];
        it(`a session at acr "${have}" asked for "${want}": ${short ? "falls short" : "meets it"}`, () => {
          expect(needsAuthentication({ acr: want }, login(have, authTime), at(0))).to.equal(short);
          // Long after its authentication, too: without max_age its age does not matter.
          expect(needsAuthentication({ acr: want }, login(have, authTime), at(86_400 * 365))).to.equal(short);
        });
      }
    }

    for (const acr of ACR_VALUES) {
      it(`max_age at acr "${acr}": over the age falls short, at or under it does not`, () => {
        const s = login(acr, authTime);
        expect(needsAuthentication({ maxAge: 300 }, s, at(299))).to.equal(false);
        expect(needsAuthentication({ maxAge: 300 }, s, at(300))).to.equal(false);
        // Seconds are whole: 300.999 s is still 300.
        expect(needsAuthentication({ maxAge: 300 }, s, at(300) + 999)).to.equal(false);
        expect(needsAuthentication({ maxAge: 300 }, s, at(301))).to.equal(true);
        expect(needsAuthentication({ maxAge: 1 }, s, at(2))).to.equal(true);
      });

      it(`max_age 0 at acr "${acr}" falls short every time, even in the second of the authentication`, () => {
        expect(needsAuthentication({ maxAge: 0 }, login(acr, authTime), at(0))).to.equal(true);
        expect(needsAuthentication({ acr, maxAge: 0 }, login(acr, authTime), at(0))).to.equal(true);
      });
    }

    it("both asked: either shortfall is enough", () => {
      const wanted: AuthRequest = { acr: "2", maxAge: 60 };
      expect(needsAuthentication(wanted, login("2", authTime), at(60))).to.equal(false);
      expect(needsAuthentication(wanted, login("2", authTime), at(61))).to.equal(true);
      expect(needsAuthentication(wanted, login("1", authTime), at(0))).to.equal(true);
    });

    it("an authentication in the future (clock skew) meets any max_age but 0", () => {
      expect(needsAuthentication({ maxAge: 10 }, login("1", authTime + 100), at(0))).to.equal(false);
      expect(needsAuthentication({ maxAge: 0 }, login("1", authTime + 100), at(0))).to.equal(true);
    });

    for (const acr of ACR_VALUES) {
      it(`an ended session (no login) falls short of acr "${acr}" and of any max_age`, () => {
        expect(needsAuthentication({ acr }, undefined, at(0))).to.equal(true);
        expect(needsAuthentication({ maxAge: 86_400 }, undefined, at(0))).to.equal(true);
      });
    }

    it("nothing asked: never falls short", () => {
      for (const acr of ACR_VALUES) expect(needsAuthentication({}, login(acr, 0), at(1e6))).to.equal(false);
    });

    it("defaults nowMs to the clock", () => {
      const now = Math.floor(Date.now() / 1000);
      expect(needsAuthentication({ maxAge: 60 }, login("1", now))).to.equal(false);
      expect(needsAuthentication({ maxAge: 60 }, login("1", now - 3600))).to.equal(true);
    });
  });

  describe("reauthenticationSteps", () => {
    const ttl = 600;

    describe("without a review entry the user matches: one step the user can complete", () => {
      for (const cfg of [undefined, config(direct("continue", ["phone_number", "email_address"]))]) {
        const name = cfg === undefined ? "no configuration" : "a continue entry only";
        it(`${name}: verify_passkey (300 s) for a passkey holder, whatever else it holds`, () => {
          for (const types of [
            [],
            ["phone_number"],
            ["email_address", "phone_number"],
          ] as IdentifierType[][]) {
            expect(reauthenticationSteps(cfg, SCOPE, held(types, true), ttl)).to.deep.equal([passkey]);
          }
        });

        it(`${name}: else verify_sms for a phone holder, else verify_email, else none`, () => {
          expect(
            reauthenticationSteps(cfg, SCOPE, held(["email_address", "phone_number"]), ttl),
          ).to.deep.equal([sms(ttl)]);
          expect(reauthenticationSteps(cfg, SCOPE, held(["email_address"]), ttl)).to.deep.equal([mail(ttl)]);
          expect(reauthenticationSteps(cfg, SCOPE, held([]), ttl)).to.deep.equal([]);
        });
      }

      for (const [codeTtl, seconds] of [
        [EXPIRATION_DURATION.min - 20, EXPIRATION_DURATION.min],
        [EXPIRATION_DURATION.min, EXPIRATION_DURATION.min],
        [600, 600],
        [EXPIRATION_DURATION.max, EXPIRATION_DURATION.max],
        [86_400, EXPIRATION_DURATION.max],
      ] as const) {
        it(`a code step lives the code's TTL within the step bounds: ${codeTtl} s gives ${seconds} s`, () => {
          expect(reauthenticationSteps(undefined, SCOPE, held(["phone_number"]), codeTtl)).to.deep.equal([
            sms(seconds),
          ]);
          expect(reauthenticationSteps(undefined, SCOPE, held(["email_address"]), codeTtl)).to.deep.equal([
            mail(seconds),
          ]);
        });
      }
    });

    describe("with review entries of the scope", () => {
      const twoSteps: Step[] = [
        { order: 1, key: "verify_sms", expirationDuration: 90 },
        { order: 2, key: "verify_passkey", expirationDuration: 120 },
      ];

      it("takes the steps of the first review entry the user matches, over the passkey fallback", () => {
        const cfg = config(
          direct("continue", ["email_address"]),
          direct("review", ["phone_number"], [sms(45)]),
          direct("review", ["email_address"], [mail(50)]),
        );
        expect(
          reauthenticationSteps(cfg, SCOPE, held(["phone_number", "email_address"], true), ttl),
        ).to.deep.equal([sms(45)]);
        expect(reauthenticationSteps(cfg, SCOPE, held(["email_address"], true), ttl)).to.deep.equal([
          mail(50),
        ]);
      });

      it("skips review entries of another scope, of types the user does not hold, and delegated entries", () => {
        const cfg = config(
          direct("review", ["phone_number"], [sms(45)], "other:scope"),
          direct("review", ["email_address"], [mail(50)]),
          { scope: SCOPE, mode: "delegated", url: "https://hooks.example/stepup" },
        );
        expect(reauthenticationSteps(cfg, SCOPE, held(["phone_number"]), ttl)).to.deep.equal([sms(ttl)]);
      });

      it("skips a review entry with a verify_passkey step for a user without a passkey", () => {
        const cfg = config(direct("review", ["phone_number"], twoSteps));
        expect(reauthenticationSteps(cfg, SCOPE, held(["phone_number"]), ttl)).to.deep.equal([sms(ttl)]);
        expect(reauthenticationSteps(cfg, SCOPE, held(["phone_number"], true), ttl)).to.deep.equal(twoSteps);
      });

      it("skips block entries: their user still gets a step of its own", () => {
        const cfg = config(direct("block", ["phone_number", "email_address"]));
        expect(reauthenticationSteps(cfg, SCOPE, held(["email_address"]), ttl)).to.deep.equal([mail(ttl)]);
      });
    });
  });
});

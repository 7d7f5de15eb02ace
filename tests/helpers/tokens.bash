# Deterministic credentials of the test worlds (unsigned JWTs, fake keys).
# shellcheck shell=bash
# shellcheck source=tests/helpers/jwt.bash
source "$BATS_TEST_DIRNAME/helpers/jwt.bash"

ALICE=$(mint_jwt '{"sub":"u-alice","token_type":"access","scope":"openid profile email proxy"}')
BOB=$(mint_jwt '{"sub":"u-bob","token_type":"access"}')
CAROL=$(mint_jwt '{"sub":"u-carol","token_type":"access"}')
ALICE_AGENT=nyxid_ag_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
ALICE_APIKEY=nyx_fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210
ALICE_DELEG_READ=$(mint_jwt '{"sub":"u-alice","delegated":true,"act":{"sub":"chrono-sandbox"},"scope":"account:read proxy:*"}')
ALICE_DELEG=$(mint_jwt '{"sub":"u-alice","delegated":true,"act":{"sub":"chrono-sandbox"},"scope":"proxy:* sandbox:execute"}')
SERVICE_ACCOUNT=$(mint_jwt '{"sub":"sa-1","sa":true}')
RELAY=$(mint_jwt '{"sub":"u-alice","relay":true}')
export ALICE BOB CAROL ALICE_AGENT ALICE_APIKEY ALICE_DELEG_READ ALICE_DELEG \
	SERVICE_ACCOUNT RELAY

# Substitute @NAME@ placeholders in fixture files with the tokens above.
render() {
	sed -e "s|@ALICE@|$ALICE|g" -e "s|@BOB@|$BOB|g" -e "s|@CAROL@|$CAROL|g" \
		-e "s|@ALICE_AGENT@|$ALICE_AGENT|g" \
		-e "s|@ALICE_APIKEY@|$ALICE_APIKEY|g" \
		-e "s|@ALICE_DELEG_READ@|$ALICE_DELEG_READ|g" \
		-e "s|@ALICE_DELEG@|$ALICE_DELEG|g" \
		-e "s|@SERVICE_ACCOUNT@|$SERVICE_ACCOUNT|g" \
		-e "s|@RELAY@|$RELAY|g" "$@"
}

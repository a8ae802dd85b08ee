/* test_server.c: `minfer serve` from outside (tests/ref/server_check.py):
 * the official openai client (chat, streaming, completions, models, seeded
 * repeats, multi-turn prefix reuse against a fresh server), every malformed
 * request's status and message, the API key, a bounded load test with
 * memory checked, the queue's 503s and a client leaving mid-stream. Each
 * case starts its own server on a free loopback port and requires it to
 * stop cleanly on SIGTERM (under ASan: with no leaks). Fails, never skips,
 * without python3 and the openai package (tools/install-deps.sh). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "support.h"

static void server_case(const char *name)
{
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "python3 -u %s/tests/ref/server_check.py %s %s ./demo-q4_k_m.gguf", src_dir(), name,
             minfer_bin());
    int rc = run_cmd(cmd, &out);
    printf("server %s:\n%s", name, out ? out : "");
    cr_assert_eq(rc, 0, "%s\n%s", cmd, out ? out : "");
    free(out);
}

Test(server, the_openai_client_chats_streams_completes_and_reuses_a_prefix, .timeout = 600) { server_case("client"); }
Test(server, malformed_requests_get_openai_errors_naming_the_field, .timeout = 300) { server_case("errors"); }
Test(server, an_api_key_is_required_where_set, .timeout = 300) { server_case("auth"); }
Test(server, eight_clients_times_25_requests_on_two_slots, .timeout = 600) { server_case("load"); }
Test(server, a_full_queue_is_a_503, .timeout = 300) { server_case("queue"); }
Test(server, a_client_leaving_mid_stream_frees_its_slot, .timeout = 300) { server_case("disconnect"); }
Test(server, a_format_without_a_system_turn_folds_it_into_the_first_user_turn, .timeout = 300)
{
    server_case("gemma_format");
}

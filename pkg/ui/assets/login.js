// The login page: a page asked for without a session shows this form, and
// the part of its address after "#" (the rollout, the fleet map) never
// reached the server; carry it on, so that the login comes back to it.
"use strict";
const next = document.querySelector('#login-form input[name="next"]');
if (next && location.hash && !next.value.includes("#") && location.pathname !== "/ui/login") next.value += location.hash;

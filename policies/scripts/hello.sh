#!/bin/sh
# Greet whoever is named in the arguments.
echo "hello ${*:-world}"
